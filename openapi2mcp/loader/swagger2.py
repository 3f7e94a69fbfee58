"""Swagger 2.0 -> OpenAPI 3.0.3, written here because prance's converter calls a web service.

The mapping (servers, components, body and form parameters, collectionFormat, x-nullable,
responses, security schemes, discriminators) is tabled in docs/loading.md#swagger-20. What has no
3.0 equivalent is converted as closely as it can be, with a warning located by JSON pointer.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from openapi2mcp.errors import SpecWarning
from openapi2mcp.loader.checks import HTTP_METHODS
from openapi2mcp.loader.reader import is_url
from openapi2mcp.loader.tree import JsonPath, copy_json, follow, pointer_parts, warn

_SWAGGER_REFS = (
    ("#/definitions/", "#/components/schemas/"),
    ("#/parameters/", "#/components/parameters/"),
    ("#/responses/", "#/components/responses/"),
)
_PARAM_SCHEMA_KEYS = (
    "type", "format", "items", "default", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "enum", "multipleOf",
)  # fmt: skip
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# collectionFormat -> (style, explode) of a query parameter; tsv has no 3.x equivalent
_QUERY_STYLES = {
    "csv": ("form", False),
    "ssv": ("spaceDelimited", False),
    "pipes": ("pipeDelimited", False),
    "multi": ("form", True),
}
_Param = tuple[JsonPath, Any, dict[str, Any]]  # a Swagger 2.0 parameter: where it stands, as written, resolved
_OAUTH_FLOWS = {
    "implicit": ("implicit", ("authorizationUrl",)),
    "password": ("password", ("tokenUrl",)),
    "application": ("clientCredentials", ("tokenUrl",)),
    "accessCode": ("authorizationCode", ("authorizationUrl", "tokenUrl")),
}


def _rewrite_ref(ref: str) -> str:
    for old, new in _SWAGGER_REFS:
        if ref.startswith(old):
            return new + ref[len(old) :]
    return ref


def _media_types(value: Any, default: list[str]) -> list[str]:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return default


def _extensions(node: dict[str, Any]) -> dict[str, Any]:
    """Vendor extensions to carry over (x-nullable is converted, not carried)."""
    return {k: v for k, v in node.items() if isinstance(k, str) and k.startswith("x-") and k != "x-nullable"}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class Swagger2:
    """Swagger 2.0 -> OpenAPI 3.0.3, reusing the (private) input's objects where they carry over."""

    def __init__(self, document: dict[str, Any], root: str, warnings: list[SpecWarning]) -> None:
        self.doc = document
        self.root = root
        self.warnings = warnings
        self.consumes = _media_types(document.get("consumes"), ["application/json"])
        self.produces = _media_types(document.get("produces"), ["application/json"])
        self._converted: set[int] = set()

    def convert(self) -> dict[str, Any]:
        doc = self.doc
        out: dict[str, Any] = {"openapi": "3.0.3"}
        out.update((k, doc[k]) for k in ("info", "externalDocs") if k in doc)
        servers = self._servers(doc.get("schemes"))
        if servers:
            out["servers"] = servers
        out.update((k, doc[k]) for k in ("tags", "security") if k in doc)
        paths = doc.get("paths") or {}
        out["paths"] = {p: self._path_item(item, ("paths", p)) for p, item in paths.items()}
        components = self._components()
        if components:
            out["components"] = components
        out.update(_extensions(doc))
        return out

    # -- servers

    def _servers(self, schemes: Any) -> list[dict[str, str]]:
        host, base = self.doc.get("host"), self.doc.get("basePath")
        base = base.rstrip("/") if isinstance(base, str) else ""
        if not isinstance(host, str) or not host:
            if is_url(self.root):  # 2.0: no host means the host that serves the document
                parts = urlsplit(self.root)
                host, schemes = parts.netloc, schemes or [parts.scheme]
            else:
                return [{"url": base}] if base else []
        names = [s for s in _as_list(schemes) if isinstance(s, str)] or ["https"]
        return [{"url": f"{scheme}://{host}{base}"} for scheme in names]

    # -- paths and operations

    def _path_item(self, item: Any, where: JsonPath) -> Any:
        if not isinstance(item, dict):
            return item
        shared = self._parameters(item, where)
        out: dict[str, Any] = {}
        for key, value in item.items():
            if key == "parameters":
                kept = [self._parameter(p, r, at) for at, p, r in shared if r.get("in") not in ("body", "formData")]
                if kept:
                    out["parameters"] = kept
            elif key in HTTP_METHODS and isinstance(value, dict):
                out[key] = self._operation(value, shared, (*where, key))
            else:
                out[key] = value
        return out

    def _operation(self, op: dict[str, Any], shared: list[_Param], where: JsonPath) -> dict[str, Any]:
        own = self._parameters(op, where)
        own_ids = {(r.get("name"), r.get("in")) for _, _, r in own}
        inherited = [
            (at, p, r)
            for at, p, r in shared
            if r.get("in") in ("body", "formData") and (r.get("name"), r.get("in")) not in own_ids
        ]
        params, bodies, forms = [], [], []
        for at, p, r in [*own, *inherited]:
            location = r.get("in")
            if location == "body":
                bodies.append(r)
            elif location == "formData":
                forms.append((at, r))
            else:
                params.append(self._parameter(p, r, at))
        out: dict[str, Any] = {}
        for key, value in op.items():
            if key == "parameters" and params:
                out["parameters"] = params
            elif key == "responses":
                out["responses"] = self._responses(value, _media_types(op.get("produces"), self.produces))
            elif key not in ("parameters", "consumes", "produces", "schemes"):
                out[key] = value
        consumes = _media_types(op.get("consumes"), self.consumes)
        body = self._request_body(bodies, forms, consumes, where)
        if body:
            out["requestBody"] = body
        if op.get("schemes") and op.get("schemes") != self.doc.get("schemes") and self.doc.get("host"):
            out["servers"] = self._servers(op["schemes"])
        return out

    def _parameters(self, owner: dict[str, Any], where: JsonPath) -> list[_Param]:
        """The parameters of a path item or operation: where each stands, as written, and resolved."""
        found = []
        for i, param in enumerate(_as_list(owner.get("parameters"))):
            at = (*where, "parameters", i)
            resolved = self._deref(param)
            if resolved:
                found.append((at, param, resolved))
            else:
                self.warnings.append(warn("parameter cannot be resolved; dropped", at))
        return found

    def _deref(self, node: Any) -> dict[str, Any]:
        """A parameter behind its local refs ({} when it cannot be found)."""
        for _ in range(16):
            if not isinstance(node, dict):
                return {}
            ref = node.get("$ref")
            if not isinstance(ref, str):
                return node
            try:
                node = follow(self.doc, pointer_parts(ref[1:])) if ref.startswith("#") else None
            except LookupError:
                node = None
        return {}

    # -- parameters

    def _parameter(self, param: Any, resolved: dict[str, Any], where: JsonPath) -> dict[str, Any]:
        ref = param.get("$ref") if isinstance(param, dict) else None
        if isinstance(ref, str) and ref.startswith("#/parameters/"):
            return {"$ref": _rewrite_ref(ref)}
        return self._plain_parameter(resolved, where)

    def _plain_parameter(self, param: dict[str, Any], where: JsonPath) -> dict[str, Any]:
        out: dict[str, Any] = {
            k: param[k] for k in ("name", "in", "description", "required", "allowEmptyValue") if k in param
        }
        if out.get("in") == "path":
            out["required"] = True
        out["schema"] = self._param_schema(param)
        if param.get("type") == "array":
            out.update(self._style(param, where))
        out.update(_extensions(param))
        return out

    def _style(self, param: dict[str, Any], where: JsonPath) -> dict[str, Any]:
        fmt = param.get("collectionFormat", "csv")
        if param.get("in") == "query":
            style = _QUERY_STYLES.get(fmt)
            if style is None:
                self.warnings.append(
                    warn(
                        f"collectionFormat {fmt!r} has no OpenAPI 3 equivalent; sent as csv",
                        (*where, "collectionFormat"),
                    )
                )
                style = _QUERY_STYLES["csv"]
            return {"style": style[0], "explode": style[1]}
        if fmt != "csv":
            self.warnings.append(
                warn(
                    f"collectionFormat {fmt!r} is not possible in {param.get('in')}; sent as csv",
                    (*where, "collectionFormat"),
                )
            )
        return {}

    def _param_schema(self, param: dict[str, Any]) -> dict[str, Any]:
        schema = {k: param[k] for k in _PARAM_SCHEMA_KEYS if k in param}
        if isinstance(schema.get("items"), dict):
            schema["items"] = self._items(schema["items"])
        if schema.get("type") == "file":
            schema.update(type="string", format="binary")
        if param.get("x-nullable") is True:
            schema["nullable"] = True
        return schema

    def _items(self, items: dict[str, Any]) -> dict[str, Any]:
        if isinstance(items.get("$ref"), str):  # not 2.0, but common: items of a schema
            self._schema(items)
            return items
        return self._param_schema(items)

    # -- bodies

    def _request_body(
        self,
        bodies: list[dict[str, Any]],
        forms: list[tuple[JsonPath, dict[str, Any]]],
        consumes: list[str],
        where: JsonPath,
    ) -> dict[str, Any] | None:
        if bodies:
            if len(bodies) > 1 or forms:
                self.warnings.append(
                    warn("more than one body (body and formData parameters); using the first body", where)
                )
            return self._json_body(bodies[0], consumes)
        if forms:
            return self._form_body(forms, consumes)
        return None

    def _json_body(self, param: dict[str, Any], consumes: list[str]) -> dict[str, Any]:
        schema = param.get("schema") if isinstance(param.get("schema"), dict) else {}
        self._schema(schema)
        # a body of "*/*" is JSON in practice (k8s); a concrete type lets later stages serialise it
        types = list(dict.fromkeys("application/json" if t in ("*/*", "application/*") else t for t in consumes))
        body: dict[str, Any] = {}
        if "description" in param:
            body["description"] = param["description"]
        body["content"] = {t: {"schema": schema if i == 0 else copy_json(schema)} for i, t in enumerate(types)}
        body["required"] = param.get("required") is True
        if isinstance(param.get("name"), str):
            body["x-codegen-request-body-name"] = param["name"]
        body.update(_extensions(param))
        return body

    def _form_body(self, forms: list[tuple[JsonPath, dict[str, Any]]], consumes: list[str]) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        encoding: dict[str, Any] = {}
        for at, param in forms:
            name = param.get("name")
            if not isinstance(name, str):
                continue
            schema = self._param_schema(param)
            if "description" in param:
                schema["description"] = param["description"]
            properties[name] = schema
            if param.get("required") is True:
                required.append(name)
            if param.get("type") == "array":
                encoding[name] = self._style({**param, "in": "query"}, at)
        has_file = any(p.get("type") == "file" for _, p in forms)
        types = [t for t in consumes if t in _FORM_TYPES]
        if has_file and "multipart/form-data" not in types:
            types = ["multipart/form-data"]  # files only travel in multipart
        types = types or ["application/x-www-form-urlencoded"]
        form: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            form["required"] = required
        content: dict[str, Any] = {}
        for i, media_type in enumerate(types):
            content[media_type] = {"schema": form if i == 0 else copy_json(form)}
            if encoding:
                content[media_type]["encoding"] = copy_json(encoding)
        return {"content": content, "required": bool(required)}

    # -- responses

    def _responses(self, responses: Any, produces: list[str]) -> Any:
        if not isinstance(responses, dict):
            return responses
        return {
            code: response if str(code).startswith("x-") else self._response(response, produces)
            for code, response in responses.items()
        }

    def _response(self, response: Any, produces: list[str]) -> Any:
        if not isinstance(response, dict):
            return response
        if isinstance(response.get("$ref"), str):
            return {"$ref": _rewrite_ref(response["$ref"])}
        out = {k: v for k, v in response.items() if k not in ("schema", "examples", "headers")}
        out.setdefault("description", "")
        content: dict[str, Any] = {}
        schema = response.get("schema")
        if isinstance(schema, dict):
            self._schema(schema)
            content = {t: {"schema": schema if i == 0 else copy_json(schema)} for i, t in enumerate(produces)}
        examples = response.get("examples")
        if isinstance(examples, dict):
            for media_type, example in examples.items():
                content.setdefault(media_type, {})["example"] = example
        if content:
            out["content"] = content
        headers = response.get("headers")
        if isinstance(headers, dict):
            out["headers"] = {name: self._header(h) for name, h in headers.items()}
        return out

    def _header(self, header: Any) -> Any:
        if not isinstance(header, dict):
            return header
        out = {"description": header["description"]} if "description" in header else {}
        out["schema"] = self._param_schema(header)
        out.update(_extensions(header))
        return out

    # -- components

    def _components(self) -> dict[str, Any]:
        doc = self.doc
        components: dict[str, Any] = {}
        definitions = doc.get("definitions")
        if isinstance(definitions, dict) and definitions:
            for schema in definitions.values():
                self._schema(schema)
            components["schemas"] = definitions
        given = doc.get("parameters")
        parameters = {
            name: self._parameter(p, self._deref(p), ("parameters", name))
            for name, p in (given.items() if isinstance(given, dict) else ())
            if self._deref(p).get("in") not in ("body", "formData")  # inlined where they are used
        }
        if parameters:
            components["parameters"] = parameters
        responses = doc.get("responses")
        if isinstance(responses, dict) and responses:
            components["responses"] = {n: self._response(r, self.produces) for n, r in responses.items()}
        security = doc.get("securityDefinitions")
        if isinstance(security, dict) and security:
            components["securitySchemes"] = {
                n: self._security_scheme(s, ("securityDefinitions", n)) for n, s in security.items()
            }
        return components

    def _security_scheme(self, scheme: Any, where: JsonPath) -> Any:
        if not isinstance(scheme, dict):
            return scheme
        kind = scheme.get("type")
        out: dict[str, Any]
        if kind == "basic":
            out = {"type": "http", "scheme": "basic"}
        elif kind == "apiKey":
            out = {"type": "apiKey", **{k: scheme[k] for k in ("name", "in") if k in scheme}}
        elif kind == "oauth2" and scheme.get("flow") in _OAUTH_FLOWS:
            flow, urls = _OAUTH_FLOWS[scheme["flow"]]
            settings = {k: scheme[k] for k in urls if k in scheme}
            out = {"type": "oauth2", "flows": {flow: {**settings, "scopes": scheme.get("scopes") or {}}}}
        else:
            self.warnings.append(warn(f"unknown security scheme type {kind!r}; kept as is", where))
            return scheme
        if "description" in scheme:
            out["description"] = scheme["description"]
        out.update(_extensions(scheme))
        return out

    # -- schemas

    def _schema(self, schema: Any) -> None:
        """Convert a schema tree in place: refs, x-nullable, type file, a string discriminator."""
        stack = [schema]
        while stack:
            node = stack.pop()
            if not isinstance(node, dict) or id(node) in self._converted:
                continue
            self._converted.add(id(node))
            ref = node.get("$ref")
            if isinstance(ref, str):
                node["$ref"] = _rewrite_ref(ref)
                if node.pop("x-nullable", None) is True:  # 3.0 ignores siblings of $ref
                    node["allOf"] = [{"$ref": node.pop("$ref")}]
                    node["nullable"] = True
                continue
            if node.pop("x-nullable", None) is True:
                node["nullable"] = True
            if node.get("type") == "file":
                node.update(type="string", format="binary")
            if isinstance(node.get("discriminator"), str):
                node["discriminator"] = {"propertyName": node["discriminator"]}
            stack.extend(node[k] for k in ("items", "additionalProperties", "not") if k in node)
            for key in ("allOf", "anyOf", "oneOf", "items"):
                stack.extend(_as_list(node.get(key)))
            for key in ("properties", "patternProperties"):
                if isinstance(node.get(key), dict):
                    stack.extend(node[key].values())
