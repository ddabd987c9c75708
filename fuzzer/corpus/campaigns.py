"""The campaigns of a corpus: one row per `fuzz run`, its progress, checkpoint and lease.

A running campaign holds a lease on its row (pid, host, heartbeat refreshed at every
checkpoint), so a second `--resume` of it is refused while the first lives, and one
killed with -9 (dead pid, or no heartbeat for LEASE_STALE_S) is taken over.
"""

from __future__ import annotations

import os
import socket
import time
import uuid

from fuzzer.corpus.connection import CorpusFile, stored_json, utc_now
from fuzzer.corpus.integrity import storage_errors_explained
from fuzzer.corpus.locking import LEASE_STALE_S, live_holder, retry_while_locked
from fuzzer.corpus.schema import sorted_json
from fuzzer.errors import InternalError, UserError
from fuzzer.running.campaign_config import stored_plugins

CAMPAIGN_STATUSES = ("running", "finished", "interrupted")


def _of(kind, value):
    """`value` if it is of `kind` (a bool is no number), else None: a damaged row's column shown as unknown."""
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


class Campaigns(CorpusFile):
    """Starting, checkpointing and finishing campaigns, their leases, and reading them back."""

    def start_campaign(self, config: dict, seed: int, versions: dict, lease: bool = True) -> int:
        """A new campaign row, leased to this process (unless `lease` is False: a merged, finished copy)."""
        with self._write():
            cursor = self.db.execute(
                "INSERT INTO campaigns (uuid, started, status, seed, config, versions) VALUES (?, ?, 'running', ?, ?, ?)",
                [str(uuid.uuid4()), utc_now(), seed, sorted_json(config), sorted_json(versions)],
            )
            if lease:
                self._set_lease(cursor.lastrowid)
            return cursor.lastrowid

    def take_lease(self, campaign_id: int) -> None:
        """Lease a campaign to this process (`--resume`): refused while another live process holds it."""
        with self._write():
            row = self._one("SELECT lease_pid, lease_host, lease_heartbeat FROM campaigns WHERE id = ?", [campaign_id])
            if row is None:
                raise self._no_campaign(campaign_id)
            holder = live_holder(row)
            if holder is not None:
                raise UserError(
                    f"Campaign {campaign_id} is running in process {holder} (last heartbeat "
                    f"{time.time() - row['lease_heartbeat']:.0f} s ago); wait for it to end or stop it before resuming."
                )
            self._set_lease(campaign_id)

    def _set_lease(self, campaign_id: int) -> None:
        self.db.execute(
            "UPDATE campaigns SET status = 'running', lease_pid = ?, lease_host = ?, lease_heartbeat = ? WHERE id = ?",
            [os.getpid(), socket.gethostname(), time.time(), campaign_id],
        )

    def checkpoint(self, campaign_id: int, state: dict, cases_run: int, findings: int) -> None:
        """Save progress and refresh this process's lease; a campaign whose lease was taken over stops here."""
        with self._write():
            if not self._exists("campaigns", campaign_id):
                raise self._no_campaign(campaign_id)
            cursor = self.db.execute(
                "UPDATE campaigns SET checkpoint = ?, cases_run = ?, findings = ?, lease_heartbeat = ? "
                "WHERE id = ? AND (lease_pid IS NULL OR (lease_pid = ? AND lease_host = ?))",
                [sorted_json(state), cases_run, findings, time.time(), campaign_id, os.getpid(), socket.gethostname()],
            )
            if cursor.rowcount == 0:
                raise UserError(f"Campaign {campaign_id} was taken over by another process (this one missed its "
                                f"heartbeat for {LEASE_STALE_S:g} s); this one stops.")
        self._give_back_free_pages()

    def finish_campaign(self, campaign_id: int, status: str = "finished", stopped_because: str | None = None) -> None:
        """Record how the campaign ended (and, for one an error stopped, the error's sentence in its
        checkpoint's `stopped_because`) and give its lease back."""
        if status not in CAMPAIGN_STATUSES:
            raise InternalError(f"campaign status {status!r} is not one of {CAMPAIGN_STATUSES}")
        with self._write():
            cursor = self.db.execute(
                "UPDATE campaigns SET status = ?, ended = ?, lease_pid = NULL, lease_host = NULL, lease_heartbeat = NULL, "
                "checkpoint = CASE WHEN ? IS NULL THEN checkpoint "
                "ELSE json_set(coalesce(checkpoint, '{}'), '$.stopped_because', ?) END WHERE id = ?",
                [status, utc_now(), stopped_because, stopped_because, campaign_id]
            )
            if cursor.rowcount == 0:
                raise self._no_campaign(campaign_id)
        self._give_back_free_pages()

    def _give_back_free_pages(self) -> None:
        """Shrink the file by the pages of the cases a bounded campaign dropped. Only a file this release
        created can (auto_vacuum INCREMENTAL is set before its first table); an older one reuses them.
        Never inside a transaction: executescript (which runs the pragma to its end) commits first."""
        if self._write_depth == 0:
            with storage_errors_explained(self.path):
                retry_while_locked(lambda: self.db.conn.executescript("PRAGMA incremental_vacuum"))

    def campaign(self, campaign_id: int) -> dict:
        row = self._one("SELECT * FROM campaigns WHERE id = ?", [campaign_id])
        if row is None:
            raise self._no_campaign(campaign_id)
        return self._campaign_dict(row)

    def campaigns(self) -> list[dict]:
        return [self._campaign_dict(row) for row in self._rows("SELECT * FROM campaigns ORDER BY id")]

    def campaign_summaries(self) -> list[dict]:
        """One small dict per campaign, oldest first: what `fuzz campaigns` lists."""
        summaries = []
        for row in self.campaigns():
            # A damaged or hostile row is listed with what it holds of the right kind, never a crash.
            checkpoint = row["checkpoint"] if isinstance(row["checkpoint"], dict) else {}
            config = row["config"] if isinstance(row["config"], dict) else {}
            elapsed = checkpoint.get("elapsed")
            text, whole = (lambda key: _of(str, row[key])), (lambda key: _of(int, row[key]))
            summaries.append({
                "id": row["id"], "uuid": text("uuid"), "status": text("status"), "started": text("started"),
                "ended": text("ended"), "seconds": _of((int, float), elapsed), "graphs": whole("cases_run"),
                "findings": whole("findings"), "seed": whole("seed"), "backends": config.get("backends"),
                "plugins": stored_plugins(row["config"]),
                "running_in_pid": row["lease_pid"] if live_holder(row) is not None else None,
                "stopped_because": checkpoint.get("stopped_because"),
            })
        return summaries

    @staticmethod
    def _campaign_dict(row: dict) -> dict:
        return {**row, **{key: stored_json(row[key]) for key in ("config", "versions", "checkpoint")}}
