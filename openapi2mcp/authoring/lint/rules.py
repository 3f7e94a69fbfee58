"""The lint rules, as data. Ids are stable: a rule may be retired, its id is never given to another.

O2M0xx: the suppression comments themselves. O2M1xx: what any model and user meet. O2M2xx: what
a client refuses (run for the profiles `--client` names; clients.py).
"""

from __future__ import annotations

from openapi2mcp.authoring.lint import checks, client_checks
from openapi2mcp.authoring.lint.model import Rule, Severity

E, W = Severity.error, Severity.warning

RULES: tuple[Rule, ...] = (
    Rule("O2M001", "suppression-reason", W,
         "A suppression without a reason hides a finding from the next reviewer without telling them why.",
         "write the reason after the comment: # o2m: ignore[O2M105] -- the API returns at most 10 items", None),
    Rule("O2M002", "unused-suppression", W,
         "A suppression that matches no finding (or names an unknown rule) hides the next real one.",
         "remove the comment, or move it onto the finding's line or the line above", None),
    Rule("O2M101", "tool-description", W,
         "The description is all a model reads to choose a tool; missing, a few words or the operationId again "
         "and it guesses.",
         "description: what the tool does, when to use it, what comes back (units, formats, limits)",
         checks.tool_descriptions),
    Rule("O2M102", "branch-description", W,
         "Each action or variant is one line of the tool's description; without words it is only its name.",
         "actions.<name>.description (or variants[i].description): what this one does", checks.branch_descriptions),
    Rule("O2M103", "argument-description", W,
         "A model fills arguments from their descriptions; an undescribed argument is filled by guesswork.",
         'params: {name: {description: "..."}} with its meaning, format and an example', checks.arg_descriptions),
    Rule("O2M104", "argument-bounds", W,
         "Bounds in the schema are checked before the call; bounds only in prose reach the API and fail there.",
         "params: {name: {maximum: N}} (minimum, maxLength, maxItems, ...) as the API documents them",
         checks.arg_bounds),
    Rule("O2M105", "pagination", W,
         "A list without `pagination` gives the model one page and no way to ask for the next.",
         "pagination: {style: page|offset|body_cursor|header_cursor|link|next_url} (docs/task-tools.md)",
         checks.pagination),
    Rule("O2M106", "response-select", W,
         "A large response without `select` fills the model's context with fields it does not need, and is cut "
         "at max_bytes.",
         'response: {select: "{...}"} keeping the identifiers, names, states and times', checks.response_select),
    Rule("O2M107", "token-budget", W,
         "tools/list is sent with every request; past the budget it crowds out the conversation.",
         "fewer or smaller tools: shorter descriptions, `select` (output schemas), hidden arguments",
         checks.token_budget),
    Rule("O2M108", "similar-descriptions", W,
         "Two tools that read alike make a model pick one at random.",
         "say in each description what sets it apart, or merge them into one tool with actions or variants",
         checks.similar_descriptions),
    Rule("O2M109", "side-effects", W,
         "A write without `side_effects` asks the user to confirm, and the audit log records, a change nobody "
         "described.",
         "side_effects: [what changes, for whom] on the tool or the action", checks.side_effects),
    Rule("O2M110", "critical-unguarded", E,
         "A critical operation that runs without confirmation or a dry run is one model mistake from damage.",
         "confirmation: required (the default for critical), or dry_run: required", checks.critical_unguarded),
    Rule("O2M111", "dangerous-operation", E,
         "Shell, exec, admin and impersonation operations let an agent do anything its token can.",
         "risk: forbidden (never listed, never callable), or leave the operation out",
         checks.dangerous_operations),
    Rule("O2M112", "spec-pin", E,
         "The spec changed since the overlay was written; its tools may no longer mean what was reviewed.",
         "review `openapi2mcp diff OLD NEW --overlay F`, then update spec.sha256", checks.spec_pin),
    Rule("O2M201", "client-tool-name", E,
         "A client refuses a tool whose name breaks its pattern or length (some refuse the whole list).",
         "shorten or rename the tool; mind the server's key in the client configuration",
         client_checks.names, clients=True),
    Rule("O2M202", "client-name-collision", E,
         "A client that rewrites or cuts names can give two tools one name; one of them cannot be called.",
         "make the names differ early", client_checks.renamed_alike, clients=True),
    Rule("O2M203", "client-top-level-schema", E,
         "Claude and OpenAI refuse an input schema with anyOf/oneOf/allOf (OpenAI also enum/not) at its root.",
         "one object of arguments at the root", client_checks.top_level, clients=True),
    Rule("O2M204", "client-schema-keyword", E,
         "Gemini's function declarations take an OpenAPI subset of JSON Schema; another keyword fails the request.",
         "narrow or hide the argument in `params`", client_checks.schema_keywords, clients=True),
    Rule("O2M205", "client-argument-name", E,
         "Gemini takes argument names of letters, digits and _ only, starting with a letter or _.",
         "rename the argument in `params`", client_checks.argument_names, clients=True),
    Rule("O2M206", "client-invalid-schema", E,
         "VS Code omits a tool whose input schema is not valid JSON Schema (draft-07).",
         "fix the schema", client_checks.meta_schema, clients=True),
    Rule("O2M207", "client-tool-count", E,
         "OpenAI's API and VS Code send at most 128 tools; a longer list fails or is cut.",
         "fewer tools: collapse related operations into actions or variants", client_checks.tool_count,
         clients=True),
)

BY_ID = {r.id: r for r in RULES}
SUPPRESSION_REASON = BY_ID["O2M001"]
UNUSED_SUPPRESSION = BY_ID["O2M002"]
