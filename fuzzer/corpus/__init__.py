"""The corpus: one sqlite file holding campaigns, cases (with their arrays) and finding buckets.

Tables (schema version 9):

    meta         key -> value; `schema_version` says which layout the file has.
    campaigns    one row per `fuzz run`: a global uuid, config, library versions, progress,
                 checkpoint, and the lease of the process running it (pid, host, heartbeat).
    cases        one row per stored case: graph JSON, verdict, findings, provenance. A case is
                 stored once: `case_key` (graph + arrays) is unique, so import,
                 merge, resume and shrink add nothing they find here already.
    case_arrays  the case's inputs and weights as .npy bytes (never pickled).
    buckets      one row per cause (fuzzer/triaging/buckets.py: "nan-inf | torch-eager:cpu | sinh"): its
                 integer id (the command line's handle B7, never reused), triage status, which all its members share; how many generated cases have a
                 finding in it (count, first and last seen, and per campaign id: campaigns);
                 the cases it keeps (below); the id of the known bug it is (fuzzer/triaging/known.py); and the
                 compiler pass `fuzz localize` named, with the versions it ran on (localization).
    members      one row per finding signature a bucket holds ("nan-inf |
                 torch-eager:cpu:float16 | sinh", an `inherited` copy on torch-module): its
                 verdict, backend and culprit, and how many findings it has (count, campaigns).
    release_checks  one row per bucket, environment and versions (`fuzz replay ID --on ENV`): the
                 outcome there (present, fixed, differs, cannot-run), when, and the case replayed (an
                 id, not a reference: a bounded corpus may drop that case later).

The sqlite header's application_id is the corpus id: random per corpus, so that a copy of another
corpus over an open one is seen before the next write (integrity.py).

The package's parts, one job a module. The Corpus class is made of one class of methods per
part, each over the one open file (CorpusFile, connection.py); a part calls another's methods
through `self` (a merge stores cases, the upgrade to schema 6 regroups buckets):

    connection.py  CorpusFile: opening (refusing a file we did not write), migrating, closing, and
                   the one write transaction at a time
    campaigns.py   Campaigns: starting, checkpointing and finishing a campaign; its lease
    store.py       CaseStore: adding a case and filing its findings in buckets; the bounded corpus
    queries.py     Queries: a stored case, cases and buckets listed and counted, `fuzz stats`
    triage.py      Triage: a bucket's status, note and known bug; regrouping (`fuzz rebucket`)
    merge.py       Merge: merging another corpus, exporting and importing cases with their triage
    releases.py    ReleaseChecks: what a bucket's case did in other releases, recorded and carried

and below them:

    schema.py      the layout, SCHEMA_VERSION and the migrations of older files
    locking.py     retrying while sqlite is locked, and campaign leases
    integrity.py   the file still the one opened, content hashes checked on read, read-only opening
    case_forms.py  a case outside the tables: the row read back (StoredCase) and the exported
                   case file, each checked before use
    stored_rows.py each column of a case, bucket and member row checked where it is read

A part imports the modules below and connection.py (triage.py also store.primary_signature), never
this file, whose names are the package's face.
"""

from __future__ import annotations

from fuzzer.corpus.campaigns import Campaigns
from fuzzer.corpus.case_forms import StoredCase, case_from_export, file_kind, is_finding, load_case_file
from fuzzer.corpus.merge import Merge
from fuzzer.corpus.queries import Queries
from fuzzer.corpus.releases import ReleaseChecks
from fuzzer.corpus.schema import SCHEMA_VERSION, case_key
from fuzzer.corpus.store import CaseStore
from fuzzer.corpus.triage import Triage
from fuzzer.triaging.buckets import STATUSES

# What other modules import from here; the package's modules are its parts (module docstring).
__all__ = ["SCHEMA_VERSION", "STATUSES", "Corpus", "StoredCase", "case_from_export", "case_key", "file_kind",
           "is_finding", "load_case_file"]


class Corpus(Campaigns, CaseStore, Queries, Triage, Merge, ReleaseChecks):
    """A corpus file. Open with `Corpus(path)`; use as a context manager or call close()."""
