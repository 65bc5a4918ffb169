"""Followers keep every node's features, so that a takeover needs no resend.

Workers' requests reach the leader (a follower forwards them, see ``forward``), but a
follower sees only the ones that came through it. So each follower asks the leader,
every ``leader.replicate_interval_s``, for what it lacks: it sends a short key of what
it holds per node, the leader answers the features of the nodes whose key differs (a
page at a time), and the follower takes them as if a worker had sent them. When the
follower becomes the leader it holds the fleet's features and writes only what changed.

A follower also holds what workers sent it while it could not forward (the leader's
address not read yet, or the leader unreachable): it notes those nodes and, before each
pull, hands their features to the leader, clearing each once the leader answered for
it. The leader takes them only over what the follower last knew it to hold (``base``):
features it got since, from the worker itself or another replica, are newer and stay.

The leader's side is ``POST /api/v1/replication/nodes`` and ``POST
/api/v1/replication/held`` (api/replication.py). With worker authentication on, it asks
for the master's own ServiceAccount token (checked with a TokenReview).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from nfd.master.core.state import NodeRecord, NodeStore
from nfd.master.replication.peers import LeaderUnreachable, Outage

if TYPE_CHECKING:
    from nfd.master.core.jobs import Jobs
    from nfd.master.core.kube import KubeApi
    from nfd.master.core.settings import MasterSettings
    from nfd.master.decisions.service import MasterService
    from nfd.master.replication.leader import LeaderElector
    from nfd.master.replication.peers import Forwarder

log = logging.getLogger(__name__)


class PeerParts(Protocol):
    """What the leader's check of a replica reads of the master's runtime
    (nfd.master.runtime.Runtime), named here so that this module does not import it."""

    @property
    def settings(self) -> MasterSettings: ...
    @property
    def api(self) -> KubeApi | None: ...
    @property
    def authenticator(self) -> object | None: ...  # whether workers authenticate: peers too


class ReplicaParts(Protocol):
    """What a follower's copying uses of the master's runtime."""

    @property
    def settings(self) -> MasterSettings: ...
    @property
    def service(self) -> MasterService: ...
    @property
    def elector(self) -> LeaderElector | None: ...
    @property
    def jobs(self) -> Jobs: ...
    @property
    def forwarder(self) -> Forwarder: ...
    def leader_url(self) -> str | None: ...
    def own_token(self) -> str | None: ...


PATH = "/api/v1/replication/nodes"
HELD_PATH = "/api/v1/replication/held"
JOB_ID = "nfd-master-replica"
PAGE = 50  # nodes per answer: about 50 kB of features each


def key(rec: NodeRecord) -> str:
    """What a replica holds for a node, in short: its features' digest and the
    device-plugin resources (the rest of a record follows from them)."""
    return _short(rec.digest, rec.device_plugin_resources)


def _short(digest: str, device_plugin_resources: Iterable[str]) -> str:
    return digest[:24] + "|" + ",".join(sorted(device_plugin_resources))


def own_key(rec: NodeRecord | None) -> str:
    """What a worker last sent for a node, in short ("" when none did): the node's own
    features, before NodeFeature objects are merged in, and its device-plugin resources."""
    if rec is None or not rec.has_worker:
        return ""
    return _short(rec.own_digest, rec.device_plugin_resources)


def node_item(store: NodeStore, rec: NodeRecord) -> dict[str, Any]:
    """A node's features as replicas send them to each other (the worker's wire shape):
    the worker's own, without what NodeFeature objects add (each replica merges those
    itself; merged twice they would differ from the leader's, and so would own_key)."""
    return {
        "node": rec.name,
        "nfdVersion": rec.nfd_version,
        "devicePluginResources": sorted(rec.device_plugin_resources),
        "features": store.features.get(rec.own_digest).to_dict(),
    }


def _take(service: MasterService, item: dict[str, Any]) -> None:
    """A node_item from another replica, taken as if its worker had sent it."""
    service.submit(
        str(item["node"]),
        features=item["features"],
        device_plugin_resources=item.get("devicePluginResources") or (),
        nfd_version=str(item.get("nfdVersion") or ""),
    )


def take_held(service: MasterService, items: Iterable[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The leader's side of a hand-over: each item's features are taken when what the
    leader holds for the node is what the follower last knew (``base``); otherwise the
    leader got newer features since and keeps them. Returns (taken, kept) node names."""
    taken: list[str] = []
    kept: list[str] = []
    for item in items:
        node = str(item["node"])
        now = own_key(service.store.get(node))
        if now != item["base"]:
            kept.append(node)
            continue
        _take(service, item)
        taken.append(node)
    return taken, kept


def wanted(records: Iterable[NodeRecord], held: dict[str, str], limit: int) -> tuple[list[NodeRecord], bool]:
    """The leader's side: the records whose key differs from ``held`` (node -> key), at
    most ``limit``; and whether more differ."""
    out: list[NodeRecord] = []
    for rec in records:
        if held.get(rec.name) == key(rec):
            continue
        if len(out) >= limit:
            return out, True
        out.append(rec)
    return out, False


class PeerAuth:
    """The leader's check that a replication request comes from another replica: its
    bearer token is the master's ServiceAccount's (a TokenReview; answers kept briefly)."""

    TTL_S = 10.0

    def __init__(self, rt: PeerParts) -> None:
        self.rt = rt
        self._ok: dict[str, float] = {}  # token -> until (monotonic)

    async def check(self, authorization: str | None) -> tuple[int, str]:
        """(0, "") when allowed, else (HTTP status, reason)."""
        if self.rt.authenticator is None or self.rt.api is None:
            return 0, ""  # --no-auth: as open as the worker endpoints
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return 401, "a replica's bearer token is required"
        token = token.strip()
        now = time.monotonic()
        if self._ok.get(token, 0.0) > now:
            return 0, ""
        try:
            review = await self.rt.api.token_review(token, [])
        except Exception as e:  # cannot check now: the follower tries again next round
            return 503, f"cannot review the token: {e}"
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return 401, "the token is not valid"
        want = self.rt.settings.auth.master_username
        got = str((status.get("user") or {}).get("username") or "")
        if got != want:
            return 403, f"{got or 'the caller'} is not {want}"
        if len(self._ok) > 64:
            self._ok.clear()
        self._ok[token] = now + self.TTL_S
        return 0, ""


class Replica:
    """The follower's side: a periodic job (``jobs``) that pulls from the leader while
    this replica follows."""

    def __init__(self, rt: ReplicaParts) -> None:
        self.rt = rt
        self.taken = 0  # nodes taken from the leader
        self.synced = False  # one full copy made since this replica started
        self.failures = 0  # rounds in a row that could not reach the leader
        # A leader that answers but refuses (the Forwarder logs one that does not answer).
        self.outage = Outage("cannot sync with the leader")
        # Nodes whose features this replica holds and the leader may lack -> the
        # own_key the leader was last known to hold for the node ("" for none).
        self.held: dict[str, str] = {}

    def hold(self, node: str, before: str) -> None:
        """A worker's features for ``node`` were kept here, not forwarded; ``before``:
        the node's own_key before them. Held again, the node keeps its first base: the
        leader has seen none of what came since."""
        if own_key(self.rt.service.store.get(node)) != before:
            self.held.setdefault(node, before)

    def passed(self, node: str) -> None:
        """The leader answered a worker's request for ``node``: it holds what the worker has."""
        self.held.pop(node, None)

    def ready(self) -> bool:
        """A new replica is Ready once it holds what the leader holds, so that a rollout
        never retires the old pods before the new ones could take over without resends.
        A leader that cannot be reached does not hold it back for long."""
        if not self.synced:  # once Ready, a replica stays so: the copy is for new pods
            elector = self.rt.elector
            self.synced = (
                self.failures >= 3
                or (elector is not None and elector.leader)
                # No other replica holds the lease (a leader whose address is not read
                # yet is no reason to take requests it would never see).
                or (elector is not None and elector.tried and elector.holder in ("", elector.s.identity))
            )
        return self.synced

    def start(self) -> None:
        interval = self.rt.settings.leader.replicate_interval_s
        self.rt.jobs.every(interval, self._round, job_id=JOB_ID, first_now=True)

    async def stop(self) -> None:
        self.rt.jobs.cancel(JOB_ID)

    async def _round(self) -> None:
        elector = self.rt.elector
        if elector is not None and elector.leader:
            self.held.clear()  # we lead: what we hold is what counts
        url = self.rt.leader_url()
        if url is None:
            return
        try:
            await self.hand_over(url)
            while await self.pull(url):
                pass  # a full page: more to come
            self.synced, self.failures = True, 0
            self.outage.ended()
        except LeaderUnreachable:  # away or changing: next round
            self.failures += 1
        except Exception as e:
            self.failures += 1
            self.outage.failed(url, f"{e} ({len(self.held)} node(s) held for it)")

    async def _post(self, url: str, body: object) -> Any:
        headers = {"content-type": "application/json"}
        token = self.rt.own_token()
        if token:
            headers["authorization"] = f"Bearer {token}"
        status, _, payload = await self.rt.forwarder.send(url, "POST", headers, json.dumps(body).encode())
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {payload[:200]!r}")
        return json.loads(payload)

    async def hand_over(self, url: str) -> None:
        """Hand the leader what this replica held, a page at a time; each node stays
        noted until the leader answered for it (taken, or newer there)."""
        store = self.rt.service.store
        nodes = list(self.held)
        for i in range(0, len(nodes), PAGE):
            items, sent = [], {}  # node -> (own_key sent, base sent)
            for node in nodes[i : i + PAGE]:
                rec = store.get(node)
                if rec is None or not rec.has_worker:  # forgotten since: nothing to hand over
                    self.held.pop(node, None)
                elif node in self.held:
                    sent[node] = (own_key(rec), self.held[node])
                    items.append({**node_item(store, rec), "base": self.held[node]})
            if not items:
                continue
            answer = await self._post(url + HELD_PATH, {"items": items})
            taken = set(answer.get("taken") or ())
            for node in taken | set(answer.get("kept") or ()):
                # Passed to the leader and noted again meanwhile: the newer base stands.
                if node not in sent or self.held.get(node) != sent[node][1]:
                    continue
                if own_key(store.get(node)) == sent[node][0]:
                    del self.held[node]
                elif node in taken:  # newer came meanwhile: the leader holds what was sent
                    self.held[node] = sent[node][0]

    async def pull(self, url: str) -> bool:
        """One page from the leader; True when it said there is more (and this page
        brought something: nodes held here are not taken, they are handed over)."""
        service = self.rt.service
        held = {rec.name: key(rec) for rec in service.store}
        answer = await self._post(url + PATH, {"held": held})
        took = False
        for item in answer.get("items") or []:
            if self.rt.leader_url() is None:
                return False  # we lead now: what we hold is what counts
            if str(item["node"]) in self.held:
                continue  # newer here, to be handed over next round
            _take(service, item)
            self.taken += 1
            took = True
        return bool(answer.get("more")) and took
