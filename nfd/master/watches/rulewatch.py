"""Where the rules come from: YAML files in ``--rules-dir`` and, unless turned off,
NodeFeatureRule objects in the cluster (listed, then watched: ``nfd.master.core.watch``).
Every change hands the whole rule list to ``on_change``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nfd.master.core.kube import KubeApi, Resource
from nfd.master.core.metrics import Metrics
from nfd.master.core.settings import RulesSettings
from nfd.master.core.watch import ListWatch, Pages
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
        page_size: int = 500,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.on_change = on_change
        self.file_docs: list[Any] = []
        self.cluster: dict[str, Any] = {}
        self.errors: list[str] = []
        s = settings
        # A 403 is not "no rules": nothing is written until they can be read.
        self.watch = (
            ListWatch(
                api=api,
                resource=Resource(s.rules_plural, s.rules_group, s.rules_version),
                page_size=page_size,
                on_list=self._listed,
                on_event=self._apply_event,
                on_synced=on_synced,
                absent=(404,),
            )
            if api is not None and settings.watch
            else None
        )

    @property
    def synced(self) -> bool:
        return self.watch is None or self.watch.synced

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
        if self.watch is not None:
            await self.watch.start()

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()

    async def _listed(self, pages: Pages) -> None:
        objs = {str((o.get("metadata") or {}).get("name")): o async for page in pages for o in page}
        first = not self.synced
        if first or _specs(objs) != _specs(self.cluster):
            self.cluster = objs
            self.on_change(self.rulesets())

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


def _specs(objs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.get("spec") for k, v in objs.items()}
