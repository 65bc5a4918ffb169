"""Where the rules come from: YAML files in ``--rules-dir`` and, unless turned off,
NodeFeatureRule objects in the cluster (listed, then watched in a background thread).
Every change hands the whole rule list to ``on_change``."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nfd.master.apierrors import KubeError, NotFound
from nfd.master.kube import KubeApi
from nfd.master.metrics import Metrics
from nfd.master.settings import RulesSettings
from nfd.rules import RuleSet, load_rulesets

log = logging.getLogger(__name__)


def read_rule_files(directory: Path) -> list[Any]:
    """Every YAML document of every ``*.yaml``/``*.yml``/``*.json`` file, in name order.
    Raises ValueError naming the file for one that cannot be read or parsed."""
    from nfd.yamlfile import YamlFileError, load_all

    if not directory.is_dir():
        raise ValueError(f"rules directory {directory} does not exist")
    docs: list[Any] = []
    for p in sorted(directory.iterdir()):
        if p.name.startswith(".") or p.suffix not in (".yaml", ".yml", ".json") or not p.is_file():
            continue
        try:
            docs.extend(load_all(str(p)))
        except YamlFileError as e:
            raise ValueError(f"rules file {e}") from None
    return docs


class RuleWatcher:
    def __init__(
        self,
        *,
        settings: RulesSettings,
        api: KubeApi | None,
        metrics: Metrics,
        on_change: Callable[[list[RuleSet]], None],
        on_synced: Callable[[], None] | None = None,
    ) -> None:
        self.on_synced = on_synced
        self.settings = settings
        self.api = api if settings.watch else None
        self.metrics = metrics
        self.on_change = on_change
        self.file_docs: list[Any] = []
        self.cluster: dict[str, Any] = {}
        self.synced = self.api is None
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._resource_version = ""

    # -- building the rule list -------------------------------------------------------
    def rulesets(self) -> list[RuleSet]:
        docs = [*self.file_docs, *(self.cluster[k] for k in sorted(self.cluster))]
        if not docs:
            return []
        try:
            sets, errors = load_rulesets(docs)
        except NotImplementedError:
            self.errors = ["the rules engine is not available; rules ignored"]
            self.metrics.rule_errors.inc()
            log.error("rules configured, but the rules engine is not available: rules ignored")
            return []
        self.errors = [str(e) for e in errors]
        for e in errors:
            log.warning("rule error: %s", e)
        if errors:
            self.metrics.rule_errors.inc(len(errors))
        return sets

    def load_files(self) -> None:
        if self.settings.rules_dir is not None:
            self.file_docs = read_rule_files(self.settings.rules_dir)

    # -- cluster ----------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.api is None:
            return
        try:
            await self._relist()
        except KubeError as e:
            log.warning("cannot list NodeFeatureRules yet (%s); not ready until it can", e)
        self._thread = threading.Thread(target=self._watch_forever, name="rule-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    async def _relist(self) -> None:
        assert self.api is not None
        s = self.settings
        try:
            listing = await self.api.list_rules(s.rules_group, s.rules_version, s.rules_plural)
        except NotFound:  # the CRD is not installed: there are no cluster rules
            listing = {"items": []}
        objs = {
            str((o.get("metadata") or {}).get("name")): o
            for o in listing.get("items") or []
            if isinstance(o, dict)
        }
        self._resource_version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
        first = not self.synced
        self.synced = True
        if first or _specs(objs) != _specs(self.cluster):
            self.cluster = objs
            self.on_change(self.rulesets())
        if first and self.on_synced is not None:
            self.on_synced()

    def _apply_event(self, kind: str, obj: dict[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        before = self.cluster.get(name)
        if kind == "DELETED":
            if before is None:
                return
            self.cluster.pop(name, None)
        elif kind in ("ADDED", "MODIFIED"):
            if before is not None and before.get("spec") == obj.get("spec"):
                return
            self.cluster[name] = obj
        else:
            return
        self.on_change(self.rulesets())

    def _watch_forever(self) -> None:
        """Blocking watch in its own thread; events are handed to the event loop. On any
        error: wait (backing off), list again, watch again."""
        from kubernetes import watch

        assert self.api is not None and self._loop is not None
        s, delay = self.settings, 1.0
        while not self._stop.is_set():
            w = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                for ev in w.stream(  # type: ignore[no-untyped-call]
                    self.api.custom.list_cluster_custom_object,
                    s.rules_group,
                    s.rules_version,
                    s.rules_plural,
                    resource_version=self._resource_version or None,
                    timeout_seconds=300,
                ):
                    if self._stop.is_set():
                        w.stop()  # type: ignore[no-untyped-call]
                        return
                    obj = ev.get("object") or {}
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        self._resource_version = str(rv)
                    self._loop.call_soon_threadsafe(self._apply_event, str(ev.get("type")), obj)
                    delay = 1.0
            except Exception as e:  # the watch breaks for many reasons; always recover
                log.info("NodeFeatureRule watch interrupted: %s", e)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, 30.0)
                fut = asyncio.run_coroutine_threadsafe(self._relist(), self._loop)
                try:
                    fut.result(timeout=60)
                except Exception as e2:
                    log.info("NodeFeatureRule relist failed: %s", e2)


def _specs(objs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.get("spec") for k, v in objs.items()}
