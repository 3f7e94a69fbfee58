"""The pet store: the protocol workhorse (every serialisation, four paging styles, binary, text)."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import struct
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.datastructures import UploadFile
from starlette.responses import Response

# Relative on purpose: the package may ship inside the wheel under another name.
from .._upstream import Api, ApiError, AuthRequirement, Call, json_response  # noqa: TID252

SPEC_PATH = Path(__file__).with_name("openapi.yaml")

MAX_PHOTO_BYTES = 5 * 1024 * 1024
_CREATED_AT = "2026-01-15T09:30:00Z"

_SEED_PETS: list[dict[str, Any]] = [
    {
        "name": "Rex",
        "tag": "dog",
        "status": "available",
        "age": 3,
        "weight_kg": 28.5,
        "color": "brown",
        "tags": ["dog", "large", "friendly"],
        "birthday": "2023-04-02",
        "category_id": 3,
    },
    {
        "name": "Mittens",
        "tag": "cat",
        "status": "available",
        "age": 2,
        "weight_kg": 4.1,
        "color": "black",
        "tags": ["cat", "small"],
        "birthday": "2024-01-20",
        "category_id": 4,
    },
    {
        "name": "Bubbles",
        "tag": "fish",
        "status": "sold",
        "age": 1,
        "weight_kg": 0.05,
        "color": "orange",
        "tags": ["fish", "small"],
        "category_id": 5,
    },
    {
        "name": "Luna",
        "tag": "cat",
        "status": "pending",
        "age": 5,
        "weight_kg": 3.8,
        "color": "white",
        "tags": ["cat", "calm"],
        "birthday": "2021-06-11",
        "category_id": 4,
    },
    {
        "name": "Max",
        "tag": "dog",
        "status": "available",
        "age": 7,
        "weight_kg": 31.0,
        "color": "black",
        "tags": ["dog", "large"],
        "birthday": "2019-09-30",
        "category_id": 3,
    },
    {
        "name": "Coco",
        "tag": "bird",
        "status": "available",
        "age": 4,
        "weight_kg": 0.4,
        "color": "green",
        "tags": ["bird", "talks"],
        "category_id": 6,
    },
    {
        "name": "Bella",
        "tag": "dog",
        "status": "sold",
        "age": 2,
        "weight_kg": 9.7,
        "color": "white",
        "tags": ["dog", "small", "friendly"],
        "birthday": "2024-03-03",
        "category_id": 3,
    },
    {
        "name": "Kiwi",
        "tag": "bird",
        "status": "pending",
        "age": 1,
        "weight_kg": 0.1,
        "color": "green",
        "tags": ["bird", "small"],
        "category_id": 6,
    },
    {
        "name": "Nemo",
        "tag": "fish",
        "status": "available",
        "age": 2,
        "weight_kg": 0.02,
        "color": "orange",
        "tags": ["fish"],
        "category_id": 5,
    },
    {
        "name": "Shadow",
        "tag": "cat",
        "status": "available",
        "age": 9,
        "weight_kg": 5.2,
        "color": "black",
        "tags": ["cat", "calm", "senior"],
        "birthday": "2017-11-05",
        "category_id": 4,
    },
    {
        "name": "Pepper",
        "tag": "dog",
        "status": "pending",
        "age": 0,
        "weight_kg": 2.3,
        "color": "grey",
        "tags": ["dog", "puppy", "small"],
        "birthday": "2026-07-01",
        "category_id": 3,
    },
    {
        "name": "Biscuit",
        "tag": "rabbit",
        "status": "available",
        "age": 3,
        "weight_kg": 1.9,
        "color": "brown",
        "tags": ["rabbit", "small", "friendly"],
        "category_id": 2,
    },
]

# id -> (name, parent id)
_CATEGORIES: dict[int, tuple[str, int | None]] = {
    1: ("Animals", None),
    2: ("Mammals", 1),
    3: ("Dogs", 2),
    4: ("Cats", 2),
    5: ("Fish", 1),
    6: ("Birds", 1),
}

_NOTES = {
    "1": "Loves long walks.\nPulls on the lead when he sees squirrels.\n最喜欢的玩具：红色的球。",
    "2": "Shy with strangers for the first day.\nEats wet food only.",
    "4": "Adoption interview scheduled.\nNeeds a quiet home.",
}

_CUSTOMERS: dict[str, dict[str, Any]] = {
    "c-1": {"id": "c-1", "name": "Anna Schmidt", "email": "anna@example.com", "tier": "gold", "since": "2021-03-14"},
    "c-2": {"id": "c-2", "name": "王小明", "email": "xiaoming@example.com", "tier": "basic", "since": "2025-08-01"},
}

_ORDERS: dict[str, dict[str, Any]] = {
    "o-1001": {
        "id": "o-1001",
        "customerId": "c-1",
        "status": "delivered",
        "currency": "EUR",
        "placedAt": "2026-02-03T10:15:00Z",
    },
    "o-1002": {
        "id": "o-1002",
        "customerId": "c-2",
        "status": "shipped",
        "currency": "EUR",
        "placedAt": "2026-05-20T16:40:00Z",
    },
    "o-1003": {
        "id": "o-1003",
        "customerId": "c-1",
        "status": "placed",
        "currency": "EUR",
        "placedAt": "2026-11-28T08:05:00Z",
    },
}

_ORDER_ITEMS: dict[str, list[dict[str, Any]]] = {
    "o-1001": [
        {"id": "i-1", "petId": "3", "description": "Adoption fee: Bubbles", "quantity": 1, "unitPriceCents": 1500},
        {"id": "i-2", "petId": "3", "description": "Fish food, 100 g", "quantity": 3, "unitPriceCents": 499},
    ],
    "o-1002": [
        {"id": "i-3", "petId": "7", "description": "Adoption fee: Bella", "quantity": 1, "unitPriceCents": 12000},
    ],
    "o-1003": [
        {"id": "i-4", "petId": "4", "description": "Reservation deposit: Luna", "quantity": 1, "unitPriceCents": 5000},
        {"id": "i-5", "petId": "4", "description": "Cat carrier", "quantity": 1, "unitPriceCents": 3499},
        {"id": "i-6", "petId": "4", "description": "Litter, 10 kg", "quantity": 2, "unitPriceCents": 1299},
    ],
}

_WRITABLE = ("name", "tag", "status", "age", "weight_kg", "color", "tags", "birthday")


@dataclasses.dataclass
class Photo:
    data: bytes
    content_type: str
    caption: str | None


@dataclasses.dataclass
class PetStore:
    pets: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    photos: dict[str, Photo] = dataclasses.field(default_factory=dict)
    next_id: int = 1
    created: int = 0
    deleted: int = 0

    @classmethod
    def seeded(cls) -> PetStore:
        store = cls()
        for seed in _SEED_PETS:
            store.add(dict(seed), created_at=_CREATED_AT)
        return store

    def add(self, fields: dict[str, Any], created_at: str) -> dict[str, Any]:
        pet_id = str(self.next_id)
        self.next_id += 1
        record = {"id": pet_id, "status": "available", "created_at": created_at, **fields}
        self.pets[pet_id] = record
        return record

    def sorted_pets(self) -> list[dict[str, Any]]:
        return sorted(self.pets.values(), key=lambda p: int(p["id"]))

    def get(self, pet_id: str) -> dict[str, Any]:
        pet = self.pets.get(pet_id)
        if pet is None:
            raise ApiError(404, "NOT_FOUND", f"pet {pet_id!r} not found", field="petId")
        return pet

    def check_name_free(self, name: str, except_id: str | None = None) -> None:
        for pet in self.pets.values():
            if pet["id"] != except_id and pet["name"].casefold() == name.casefold():
                raise ApiError(
                    409, "DUPLICATE_NAME", f"a pet named {pet['name']!r} already exists (id {pet['id']})", field="name"
                )

    def summary(self) -> dict[str, Any]:
        return {"pets": len(self.pets), "created": self.created, "deleted": self.deleted, "photos": len(self.photos)}


api: Api[PetStore] = Api("petstore", SPEC_PATH, PetStore.seeded)


def create_app(*, auth: AuthRequirement | str | None = None, validate_responses: bool = True) -> Any:
    return api.create_app(auth=auth, validate_responses=validate_responses)


# ---- representation


def _category(category_id: int) -> dict[str, Any]:
    name, parent = _CATEGORIES[category_id]
    node: dict[str, Any] = {"id": category_id, "name": name}
    if parent is not None:
        node["parent"] = _category(parent)
    return node


def _category_tree(parent: int | None = None) -> list[dict[str, Any]]:
    return [
        {"id": cid, "name": name, "children": _category_tree(cid)}
        for cid, (name, pid) in sorted(_CATEGORIES.items())
        if pid == parent
    ]


def _pet_out(pet: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": pet["id"]}
    for key in _WRITABLE:
        if pet.get(key) is not None:
            out[key] = pet[key]
    if pet.get("category_id") is not None:
        out["category"] = _category(pet["category_id"])
    out["createdAt"] = pet["created_at"]
    return out


def _iso(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


def _writable_fields(body: dict[str, Any]) -> dict[str, Any]:
    fields = {key: _iso(body[key]) for key in _WRITABLE if key in body}
    if "categoryId" in body:
        if body["categoryId"] not in _CATEGORIES:
            raise ApiError(422, "UNKNOWN_CATEGORY", f"no category {body['categoryId']}", field="categoryId")
        fields["category_id"] = body["categoryId"]
    return fields


def _matches(
    pet: dict[str, Any],
    *,
    status: str | None = None,
    tags: list[str] | None = None,
    ids: list[str] | None = None,
    name: str | None = None,
    color: str | None = None,
    min_age: int | None = None,
    max_age: int | None = None,
) -> bool:
    if status is not None and pet["status"] != status:
        return False
    if tags and not set(tags) <= set(pet.get("tags") or []):
        return False
    if ids is not None and pet["id"] not in ids:
        return False
    if name is not None and name.casefold() not in pet["name"].casefold():
        return False
    if color is not None and (pet.get("color") or "").casefold() != color.casefold():
        return False
    age = pet.get("age")
    if min_age is not None and (age is None or age < min_age):
        return False
    return not (max_age is not None and (age is None or age > max_age))


def _encode_cursor(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str | None, **expected: Any) -> int:
    if cursor is None:
        return 0
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset = data["o"]
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(offset)
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise ApiError(
            400, "INVALID_CURSOR", "the cursor is malformed; start again without one", field="cursor"
        ) from None
    for key, value in expected.items():
        if data.get(key) != value:
            raise ApiError(400, "INVALID_CURSOR", f"the cursor was issued for a different {key}", field="cursor")
    return offset


def _png_placeholder() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\xa5\x00\xff")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


PLACEHOLDER_PNG = _png_placeholder()


# ---- pets


@api.operation("listPets")
async def list_pets(call: Call[PetStore]) -> Response:
    q = call.query
    raw = call.request.query_params
    per_page = q["per_page"] if "per_page" in raw or "limit" not in raw else q["limit"]
    page = q["page"]
    flt = q.get("filter") or {}
    pets = [
        p
        for p in call.state.sorted_pets()
        if _matches(
            p,
            status=q.get("status"),
            tags=q.get("tags"),
            ids=q.get("ids"),
            color=flt.get("color"),
            min_age=flt.get("minAge"),
            max_age=flt.get("maxAge"),
        )
    ]
    sort = q.get("sort", "id")
    if sort != "id":
        key = sort.lstrip("-")
        pets.sort(
            key=lambda p: (p.get(key) is None, p.get(key) if key != "name" else p["name"].casefold()),
            reverse=sort.startswith("-"),
        )
    start = (page - 1) * per_page
    headers = {"X-Total-Count": str(len(pets))}
    if "X-Request-ID" in call.headers:
        headers["X-Request-ID"] = call.headers["X-Request-ID"]
    if "session" in call.cookies:
        headers["X-Session-Seen"] = "yes"
    body = {
        "items": [_pet_out(p) for p in pets[start : start + per_page]],
        "total": len(pets),
        "page": page,
        "per_page": per_page,
    }
    return json_response(body, headers=headers)


@api.operation("createPet")
async def create_pet(call: Call[PetStore]) -> Response:
    fields = _writable_fields(call.body)
    call.state.check_name_free(fields["name"])
    pet = call.state.add(fields, created_at=_CREATED_AT)
    call.state.created += 1
    return json_response(_pet_out(pet), 201, {"Location": f"/pets/{quote(pet['id'], safe='')}"})


@api.operation("searchPetsForm")
async def search_pets_form(call: Call[PetStore]) -> Response:
    b = call.body or {}
    pets = [
        p
        for p in call.state.sorted_pets()
        if _matches(p, status=b.get("status"), tags=b.get("tags"), name=b.get("name"), min_age=b.get("min_age"))
    ][:50]
    return json_response({"items": [_pet_out(p) for p in pets], "total": len(pets)})


@api.operation("getPet")
async def get_pet(call: Call[PetStore]) -> Response:
    return json_response(_pet_out(call.state.get(call.path["petId"])))


@api.operation("replacePet")
async def replace_pet(call: Call[PetStore]) -> Response:
    pet = call.state.get(call.path["petId"])
    fields = _writable_fields(call.body)
    call.state.check_name_free(fields["name"], except_id=pet["id"])
    replaced = {"id": pet["id"], "status": "available", "created_at": pet["created_at"], **fields}
    call.state.pets[pet["id"]] = replaced
    return json_response(_pet_out(replaced))


@api.operation("updatePet")
async def update_pet(call: Call[PetStore]) -> Response:
    pet = call.state.get(call.path["petId"])
    patch: dict[str, Any] = call.body
    if "name" in patch:
        call.state.check_name_free(patch["name"], except_id=pet["id"])
    if pet["status"] == "sold" and patch.get("status", "sold") != "sold":
        raise ApiError(422, "INVALID_TRANSITION", f"pet {pet['id']} is sold; its status cannot change", field="status")
    for key, value in patch.items():
        if value is None:
            pet.pop(key, None)
        else:
            pet[key] = _iso(value)
    return json_response(_pet_out(pet))


@api.operation("deletePet")
async def delete_pet(call: Call[PetStore]) -> Response:
    pet = call.state.get(call.path["petId"])
    del call.state.pets[pet["id"]]
    call.state.photos.pop(pet["id"], None)
    call.state.deleted += 1
    return Response(status_code=204)


@api.operation("uploadPetPhoto")
async def upload_pet_photo(call: Call[PetStore]) -> Response:
    pet = call.state.get(call.path["petId"])
    form = await call.request.form(max_part_size=MAX_PHOTO_BYTES + 1)
    upload = form.get("file")
    data = await upload.read() if isinstance(upload, UploadFile) else str(upload or "").encode()
    caption = form.get("caption")
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        content_type = "image/png"
    elif data.startswith(b"\xff\xd8\xff"):
        content_type = "image/jpeg"
    else:
        raise ApiError(422, "UNSUPPORTED_IMAGE", "the file is neither a PNG nor a JPEG image", field="file")
    if len(data) > MAX_PHOTO_BYTES:
        raise ApiError(422, "TOO_LARGE", f"the image has {len(data)} bytes; at most {MAX_PHOTO_BYTES}", field="file")
    text = caption if isinstance(caption, str) else None
    call.state.photos[pet["id"]] = Photo(data, content_type, text)
    info: dict[str, Any] = {
        "petId": pet["id"],
        "sizeBytes": len(data),
        "contentType": content_type,
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    if text is not None:
        info["caption"] = text
    return json_response(info, 201)


@api.operation("getPetPhoto")
async def get_pet_photo(call: Call[PetStore]) -> Response:
    pet = call.state.get(call.path["petId"])
    photo = call.state.photos.get(pet["id"])
    if photo is None:
        return Response(PLACEHOLDER_PNG, media_type="image/png")
    return Response(photo.data, media_type=photo.content_type)


@api.operation("getPetNotes")
async def get_pet_notes(call: Call[PetStore]) -> Response:
    pet = call.state.get(call.path["petId"])
    text = _NOTES.get(pet["id"], f"No notes about {pet['name']} yet.")
    return Response(text, media_type="text/plain")


# ---- paging styles


@api.operation("listPetsOffset")
async def list_pets_offset(call: Call[PetStore]) -> Response:
    q = call.query
    pets = [p for p in call.state.sorted_pets() if _matches(p, status=q.get("status"))]
    offset, limit = q["offset"], q["limit"]
    body = {
        "items": [_pet_out(p) for p in pets[offset : offset + limit]],
        "total": len(pets),
        "offset": offset,
        "limit": limit,
    }
    return json_response(body)


@api.operation("listPetsCursor")
async def list_pets_cursor(call: Call[PetStore]) -> Response:
    q = call.query
    status = q.get("status")
    offset = _decode_cursor(q.get("cursor"), s=status)
    pets = [p for p in call.state.sorted_pets() if _matches(p, status=status)]
    end = offset + q["limit"]
    next_cursor = _encode_cursor({"o": end, "s": status}) if end < len(pets) else None
    return json_response({"items": [_pet_out(p) for p in pets[offset:end]], "next_cursor": next_cursor})


@api.operation("listPetsLinked")
async def list_pets_linked(call: Call[PetStore]) -> Response:
    page, per_page = call.query["page"], call.query["per_page"]
    pets = call.state.sorted_pets()
    last = max((len(pets) + per_page - 1) // per_page, 1)

    def link(n: int, rel: str) -> str:
        return f'<{call.base_url}/pets-linked?page={n}&per_page={per_page}>; rel="{rel}"'

    links = [link(1, "first")]
    if page > 1:
        links.append(link(min(page - 1, last), "prev"))
    if page < last:
        links.append(link(page + 1, "next"))
    links.append(link(last, "last"))
    start = (page - 1) * per_page
    headers = {"Link": ", ".join(links), "X-Total-Count": str(len(pets))}
    return json_response([_pet_out(p) for p in pets[start : start + per_page]], headers=headers)


@api.operation("listPetsHeaderCursor")
async def list_pets_header_cursor(call: Call[PetStore]) -> Response:
    offset = _decode_cursor(call.query.get("cursor"))
    pets = call.state.sorted_pets()
    end = offset + call.query["limit"]
    headers = {"X-Next-Cursor": _encode_cursor({"o": end})} if end < len(pets) else {}
    return json_response([_pet_out(p) for p in pets[offset:end]], headers=headers)


# ---- categories, orders, customers, health


@api.operation("getCategory")
async def get_category(call: Call[PetStore]) -> Response:
    category_id = call.path["categoryId"]
    if category_id not in _CATEGORIES:
        raise ApiError(404, "NOT_FOUND", f"category {category_id} not found", field="categoryId")
    return json_response(_category(category_id))


@api.operation("getCategoryTree")
async def get_category_tree(call: Call[PetStore]) -> Response:
    return json_response(_category_tree())


def _order(order_id: str) -> dict[str, Any]:
    order = _ORDERS.get(order_id)
    if order is None:
        raise ApiError(404, "NOT_FOUND", f"order {order_id!r} not found", field="orderId")
    return order


@api.operation("getOrder")
async def get_order(call: Call[PetStore]) -> Response:
    order = _order(call.path["orderId"])
    items = _ORDER_ITEMS[order["id"]]
    total = sum(i["quantity"] * i["unitPriceCents"] for i in items)
    return json_response({**order, "itemIds": [i["id"] for i in items], "totalCents": total})


@api.operation("listOrderItems")
async def list_order_items(call: Call[PetStore]) -> Response:
    order = _order(call.path["orderId"])
    return json_response(_ORDER_ITEMS[order["id"]])


@api.operation("getCustomer")
async def get_customer(call: Call[PetStore]) -> Response:
    customer = _CUSTOMERS.get(call.path["customerId"])
    if customer is None:
        raise ApiError(404, "NOT_FOUND", f"customer {call.path['customerId']!r} not found", field="customerId")
    return json_response(customer)


@api.operation("getHealth")
async def get_health(call: Call[PetStore]) -> Response:
    return json_response({"status": "ok", "version": "1.4.0", "pets": len(call.state.pets)})
