"""Mail and files (seed 002): external e-mail, bulk campaigns with dry run, idempotent download links."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

from starlette.responses import Response

# Relative on purpose: the package may ship inside the wheel under another name.
from .._upstream import Api, ApiError, AuthRequirement, Call, json_response  # noqa: TID252

SPEC_PATH = Path(__file__).with_name("openapi.yaml")

MAX_LINK_DAYS = 90
BLOCKED_DOMAINS = ("blocked.example", "competitor.example")

TEMPLATES = {
    "tmpl_newsletter_q3": ("Ihr Q3-Update ist da", "{greeting}, im dritten Quartal haben wir…"),
    "tmpl_welcome": ("Willkommen bei uns!", "{greeting}, schön, dass Sie da sind…"),
}

# segment -> (recipient count, sample (address, greeting) pairs, warnings)
SEGMENTS: dict[str, tuple[int, list[tuple[str, str]], list[str]]] = {
    "seg_active_customers": (
        4821,
        [("anna.schmidt@example.com", "Liebe Anna"), ("max.mueller@example.com", "Lieber Max")],
        [
            "43 Empfänger haben keinen Vornamen – Fallback 'Hallo' wird verwendet.",
            "12 E-Mail-Adressen sind als unzustellbar markiert und werden übersprungen.",
        ],
    ),
    "seg_trial_users": (137, [("lea.wagner@example.com", "Liebe Lea")], []),
    "seg_empty": (0, [], []),
}

_SEED_FILES: list[dict[str, Any]] = [
    {
        "id": "f_abc123",
        "name": "Q3-Report.pdf",
        "sizeBytes": 2_457_600,
        "mimeType": "application/pdf",
        "createdAt": "2026-10-01T09:00:00Z",
        "owner": "anna.schmidt@example.com",
        "description": "Quarterly report",
    },
    {
        "id": "f_def456",
        "name": "customers.csv",
        "sizeBytes": 81_920,
        "mimeType": "text/csv",
        "createdAt": "2026-10-15T12:30:00Z",
        "owner": "max.mueller@example.com",
        "description": None,
    },
    {
        "id": "f_ghi789",
        "name": "logo.png",
        "sizeBytes": 15_360,
        "mimeType": "image/png",
        "createdAt": "2026-11-02T08:45:00Z",
        "owner": "anna.schmidt@example.com",
        "description": "Company logo",
    },
    {
        "id": "f_jkl012",
        "name": "合同-2026.docx",
        "sizeBytes": 40_960,
        "mimeType": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "createdAt": "2026-11-20T16:00:00Z",
        "owner": "wang.fang@example.com",
        "description": "供应商合同",
    },
]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _as_datetime(value: Any) -> dt.datetime:
    moment = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


@dataclasses.dataclass
class MailFilesState:
    files: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    sent: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    campaigns: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    links: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    idempotency: dict[str, tuple[str, str, str]] = dataclasses.field(default_factory=dict)  # key -> (file, exp, link)
    links_created: int = 0
    dry_runs: int = 0
    files_deleted: int = 0

    @classmethod
    def seeded(cls) -> MailFilesState:
        return cls(files={f["id"]: dict(f) for f in _SEED_FILES})

    def summary(self) -> dict[str, Any]:
        return {
            "emails_sent": len(self.sent),
            "sent_to": [m["to"] for m in self.sent],
            "campaigns_started": len(self.campaigns),
            "bulk_recipients": sum(c["recipientCount"] for c in self.campaigns.values()),
            "dry_runs": self.dry_runs,
            "download_links_created": self.links_created,
            "files": len(self.files),
            "files_deleted": self.files_deleted,
        }

    def file(self, file_id: str) -> dict[str, Any]:
        found = self.files.get(file_id)
        if found is None:
            raise ApiError(404, "NOT_FOUND", f"file {file_id} not found", field="fileId")
        return found


api: Api[MailFilesState] = Api("mailfiles", SPEC_PATH, MailFilesState.seeded)


def create_app(*, auth: AuthRequirement | str | None = None, validate_responses: bool = True) -> Any:
    return api.create_app(auth=auth, validate_responses=validate_responses)


def _check_recipient(address: str, field: str) -> None:
    domain = address.rpartition("@")[2].lower()
    if domain in BLOCKED_DOMAINS:
        raise ApiError(422, "RECIPIENT_BLOCKED", f"mail to {domain} is blocked by policy", field=field)


@api.operation("sendExternalEmail")
async def send_external_email(call: Call[MailFilesState]) -> Response:
    body: dict[str, Any] = call.body
    _check_recipient(body["to"], "to")
    for address in body.get("cc") or []:
        _check_recipient(address, "cc")
    message_id = f"msg_{len(call.state.sent) + 1}"
    call.state.sent.append({"messageId": message_id, "to": body["to"], "subject": body["subject"]})
    return json_response({"messageId": message_id, "status": "queued", "to": body["to"], "queuedAt": _iso(_now())}, 202)


@api.operation("bulkSendEmails")
async def bulk_send_emails(call: Call[MailFilesState]) -> Response:
    body: dict[str, Any] = call.body
    template = TEMPLATES.get(body["templateId"])
    if template is None:
        raise ApiError(404, "UNKNOWN_TEMPLATE", f"no template {body['templateId']}", field="templateId")
    segment = SEGMENTS.get(body["segmentId"])
    if segment is None:
        raise ApiError(404, "UNKNOWN_SEGMENT", f"no segment {body['segmentId']}", field="segmentId")
    count, samples, warnings = segment
    if count == 0:
        raise ApiError(422, "EMPTY_SEGMENT", f"segment {body['segmentId']} has no recipients", field="segmentId")
    subject, preview = template
    if body.get("dryRun", False):
        call.state.dry_runs += 1
        return json_response(
            {
                "dryRun": True,
                "recipientCount": count,
                "sampleMessages": [
                    {"to": to, "subject": subject, "previewText": preview.format(greeting=greeting)}
                    for to, greeting in samples
                ],
                "warnings": warnings,
                "missingPermissions": [],
                "expectedSideEffects": [
                    f"{count} externe E-Mails werden versendet.",
                    f"{count} Audit-Events vom Typ email.external.sent werden erzeugt.",
                    "Kampagnen-Status wird auf 'sent' gesetzt.",
                ],
                "estimatedDurationMs": round(count * 3.8166),
            }
        )
    campaign_id = f"cmp_{len(call.state.campaigns) + 1}"
    campaign = {
        "campaignId": campaign_id,
        "templateId": body["templateId"],
        "segmentId": body["segmentId"],
        "status": "sending",
        "recipientCount": count,
        "startedAt": _iso(_now()),
    }
    call.state.campaigns[campaign_id] = campaign
    return json_response(campaign, 202)


@api.operation("getCampaign")
async def get_campaign(call: Call[MailFilesState]) -> Response:
    campaign = call.state.campaigns.get(call.path["campaignId"])
    if campaign is None:
        raise ApiError(404, "NOT_FOUND", f"campaign {call.path['campaignId']} not found", field="campaignId")
    return json_response(campaign)


@api.operation("listFiles")
async def list_files(call: Call[MailFilesState]) -> Response:
    mime = call.query.get("mimeType")
    files = [f for _, f in sorted(call.state.files.items()) if mime is None or f["mimeType"] == mime]
    offset, limit = call.query["offset"], call.query["limit"]
    return json_response({"items": files[offset : offset + limit], "total": len(files)})


@api.operation("getFile")
async def get_file(call: Call[MailFilesState]) -> Response:
    return json_response(call.state.file(call.path["fileId"]))


@api.operation("deleteFile")
async def delete_file(call: Call[MailFilesState]) -> Response:
    file = call.state.file(call.path["fileId"])
    del call.state.files[file["id"]]
    call.state.links = [link for link in call.state.links if link["fileId"] != file["id"]]
    call.state.files_deleted += 1
    return Response(status_code=204)


@api.operation("createDownloadLink")
async def create_download_link(call: Call[MailFilesState]) -> Response:
    file = call.state.file(call.path["fileId"])
    expires = _as_datetime(call.body["expiresAt"])
    expires_text = _iso(expires)
    key = call.headers.get("Idempotency-Key")
    now = _now()
    if key is not None and key in call.state.idempotency:
        file_id, exp, link_id = call.state.idempotency[key]
        if (file_id, exp) != (file["id"], expires_text):
            raise ApiError(
                409, "IDEMPOTENCY_KEY_REUSED", "this Idempotency-Key was used with a different file or expiresAt"
            )
        for link in call.state.links:
            if link["linkId"] == link_id:
                return json_response({**link, "reused": True}, 200, {"Idempotent-Replayed": "true"})
    if expires <= now:
        raise ApiError(422, "INVALID_EXPIRY", f"expiresAt {expires_text} is not in the future", field="expiresAt")
    if expires > now + dt.timedelta(days=MAX_LINK_DAYS):
        raise ApiError(422, "INVALID_EXPIRY", f"expiresAt is more than {MAX_LINK_DAYS} days ahead", field="expiresAt")
    for link in call.state.links:
        if link["fileId"] == file["id"] and link["expiresAt"] == expires_text:
            if key is not None:
                call.state.idempotency[key] = (file["id"], expires_text, link["linkId"])
            return json_response({**link, "reused": True})
    call.state.links_created += 1
    link_id = f"dl_{call.state.links_created}"
    token = hashlib.sha256(f"{file['id']}|{expires_text}|{link_id}".encode()).hexdigest()[:24]
    link = {
        "linkId": link_id,
        "fileId": file["id"],
        "url": f"https://files.example.com/dl/{token}",
        "expiresAt": expires_text,
        "createdAt": _iso(now),
        "reused": False,
    }
    call.state.links.append(link)
    if key is not None:
        call.state.idempotency[key] = (file["id"], expires_text, link_id)
    return json_response(link, 201)
