"""List changes: telling connected clients that the tools (or resources, prompts) changed.

Only a Runtime made with `RuntimeOptions(list_changed=True)` has a `ListChanges` (`openapi2mcp
serve --reload`): its server declares `listChanged: true` and `Runtime.reload` is announced; every
other server declares `listChanged: false`, as before, and never sends one. Per era:

* **2025-11-25** (initialize handshake): `notifications/tools/list_changed` (and the resources and
  prompts ones) on every open session, on the session's own channel (stdio; over Streamable HTTP
  the GET stream the client opened). A session is known from its `notifications/initialized`; one
  that cannot be written to any more has ended and is forgotten.
* **2026-07-28**: there are no sessions to push to. The revision delivers list changes only on
  `subscriptions/listen` streams, and only the kinds the client asked for in its filter
  (`toolsListChanged`, ...); the capability's `listChanged` says whether the server serves such
  streams. So the server serves `subscriptions/listen` (the SDK's `ListenHandler` over an
  in-process bus) and a reload publishes on the bus; a client without a stream re-lists when its
  cached list expires (tools/list answers carry ttlMs 0) or when a call is refused for a changed schema.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Final, Literal

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)

log = logging.getLogger("openapi2mcp.runtime")

Kind = Literal["tools", "resources", "prompts"]
KINDS: Final[tuple[Kind, ...]] = ("tools", "resources", "prompts")
SEND_TIMEOUT: Final = 2.0  # seconds one session may take to take a notification (a stuck one is dropped)

_EVENTS: Final[dict[Kind, ServerEvent]] = {
    "tools": ToolsListChanged(), "resources": ResourcesListChanged(), "prompts": PromptsListChanged(),
}


class AnnouncingServer(Server[Any]):
    """The SDK server whose 2025-11-25 handshake declares `listChanged: true` for tools, resources and prompts.

    (At 2026-07-28 the SDK derives `listChanged` from `subscriptions/listen` being served.) The
    transports build the initialize answer from `create_initialization_options()` without
    arguments, so the default is set here.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(prompts_changed=True, resources_changed=True,
                                                               tools_changed=True)
        return super().create_initialization_options(options, experimental_capabilities, extensions)


class ListChanges:
    """The open 2025-11-25 sessions and the 2026-07-28 listen streams of one Runtime, and what a reload tells them."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self.sessions: list[ServerSession] = []  # one per 2025-11-25 session, from its notifications/initialized

    def install(self, server: Server[Any]) -> None:
        """Serve `subscriptions/listen` and learn each 2025-11-25 session as it starts."""
        server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, self.listen)
        server.add_notification_handler("notifications/initialized", types.NotificationParams, self._initialized)

    async def _initialized(self, ctx: Any, params: types.NotificationParams) -> None:
        session = getattr(ctx, "session", None)
        if isinstance(session, ServerSession):
            self.sessions.append(session)

    async def announce(self, changed: Iterable[Kind]) -> int:
        """Tell every client that these lists changed; returns how many 2025-11-25 sessions were told."""
        kinds = [k for k in KINDS if k in set(changed)]
        if not kinds:
            return 0
        for kind in kinds:
            await self.bus.publish(_EVENTS[kind])
        told, alive = 0, []
        for session in self.sessions:
            if await _notify(session, kinds):
                told += 1
                alive.append(session)
        self.sessions = alive
        return told


async def _notify(session: ServerSession, kinds: list[Kind]) -> bool:
    """Send the list_changed notifications on one 2025-11-25 session; False when it has ended."""
    senders = {"tools": session.send_tool_list_changed, "resources": session.send_resource_list_changed,
               "prompts": session.send_prompt_list_changed}
    try:
        with anyio.fail_after(SEND_TIMEOUT):
            for kind in kinds:
                await senders[kind]()
    except Exception as e:  # a closed stream, a client gone, a stuck channel: the session is over for us
        log.debug("list_changed not delivered (%s); forgetting the session", type(e).__name__)
        return False
    return True
