"""Integer, bool and complex graphs inside a float campaign: which graphs, and on which backends.

A campaign of float backends (the default `cpu` set) gives a share of its graphs to the integer and
bool dtypes (`--integer-share`) and a share to the complex ones (`--complex-share`). Such a graph is
drawn from that family's regimes and ops, as a campaign of only that dtype's backends draws it
(fuzzer/exact_dtypes.py, fuzzer/complex_dtypes.py), and runs on that dtype's *lane*: the variants in
that dtype of the campaign's built-in kinds that declare it (torch-eager:cpu:float32 gives
torch-eager:cpu:int32), after the campaign's own backends of that dtype (a plugin's
`fault-saturating-mul`, derived from torch-eager:cpu:int32). It is judged as that campaign judges
it: exactly, or per component.

Which graph goes where is a function of its index alone, so the parent, a worker and a resume agree:
the family graphs are spread evenly (the k-th of them is index floor(k / share)), split between the
families by their shares, and each family's dtypes take their turns in order (int8, int16, int32,
int64, uint8, bool, int8, ...), so each dtype gets its turn in a short campaign too; a dtype the
campaign lists a backend of (a plugin's) takes every other turn (`turns`).

A lane's compilers spend a part of their float peer's compile budget (fuzzer/running/budget.py), the families'
share of it: torch-compile:cpu:int32 compiles on a share of torch-compile:cpu:float32's, in the worker
slots that run it (compiler affinity), so the families take graphs and compile time from the float
campaign at their share, not compile time on top of it. On that account each lane compiler has its own
novelty tier (budget.CompileBudget.add_lane_compiler): its lane's ops compiled alone first, in the lane's dtype.
"""

from __future__ import annotations

import math

from fuzzer.backend_names import BackendName
from fuzzer.backends import Backend, get_backend, kind_family
from fuzzer.complex_dtypes import COMPLEX_DTYPES, is_complex
from fuzzer.errors import UserError
from fuzzer.exact_dtypes import EXACT_DTYPES, is_exact

# `fuzz run`'s defaults (bench/dtype_families.sh measured what they cost); a campaign built in code
# (a plugin's test, selftest) draws only float graphs unless it asks.
DEFAULT_INTEGER_SHARE = 0.1
DEFAULT_COMPLEX_SHARE = 0.05


def is_float(dtype: str) -> bool:
    return not is_exact(dtype) and not is_complex(dtype)


def family_lanes_apply(backends: list[Backend]) -> bool:
    """Does this campaign give shares of its graphs to the families? Only one with a float backend: a
    campaign of integer or complex backends only draws all its graphs in their dtypes already."""
    return any(is_float(backend.dtype) for backend in backends)


def float_backends(backends: list[Backend]) -> list[Backend]:
    """The backends of a campaign's float graphs: its float ones; all of them in a campaign without any
    (of integer or complex backends only, whose every graph is in their dtypes)."""
    return [backend for backend in backends if is_float(backend.dtype)] or list(backends)


def default_shares(backends: list[Backend], ops_given: bool) -> tuple[float, float]:
    """`fuzz run`'s --integer-share and --complex-share where not given: the defaults, but 0 for a family
    in a campaign narrowed to some ops or to a plugin's float backend, as its programs are (it draws what it
    was told), unless it lists a backend of that family (a plugin's fault-saturating-mul: what it is for)."""
    narrowed = ops_given or any(kind_family(BackendName.parse(b.name)) is None for b in backends if is_float(b.dtype))
    return (DEFAULT_INTEGER_SHARE if not narrowed or any(is_exact(b.dtype) for b in backends) else 0.0,
            DEFAULT_COMPLEX_SHARE if not narrowed or any(is_complex(b.dtype) for b in backends) else 0.0)


def check_shares(backends: list[Backend], integer_share: float, complex_share: float) -> None:
    """UserError, in one sentence, for shares over 1 together, or for an integer or complex backend listed
    beside float ones where its family gets no graphs (it would never run)."""
    if integer_share + complex_share > 1.0 + 1e-9:
        raise UserError(f"--integer-share {integer_share:g} and --complex-share {complex_share:g} add up to more than 1; "
                        "they are shares of the campaign's graphs.")
    if not family_lanes_apply(backends):
        return
    for backend in backends:
        if is_exact(backend.dtype) and not integer_share or is_complex(backend.dtype) and not complex_share:
            flag = "--integer-share" if is_exact(backend.dtype) else "--complex-share"
            raise UserError(f"Backend '{backend.name}' runs {backend.dtype} tensors, which a campaign of float backends "
                            f"draws only with {flag} above 0; raise it or leave the backend out.")


def lane_backends(backends: list[Backend], dtype: str) -> list[Backend]:
    """The backends that run the graphs of `dtype` in a float campaign of `backends`: its own backends
    of that dtype, then the variant in that dtype of each built-in float backend's kind that declares it
    (once per kind and device), in campaign order."""
    names = [backend.name for backend in backends if backend.dtype == dtype]
    for backend in backends:
        name = BackendName.parse(backend.name)
        if is_float(backend.dtype) and kind_family(name) is not None and name.env is None and dtype in type(backend).dtypes:
            names.append(f"{name.kind}:{name.device}:{dtype}")
    mine = {backend.name: backend for backend in backends}
    return [mine.get(name) or get_backend(name) for name in dict.fromkeys(names)]


def budget_account(backend: Backend, float_backends: list[Backend]) -> str | None:
    """The float compiler whose compile budget a lane's compiler spends: the campaign's first one of its
    kind on its device. None where there is none (a plugin's compiler of another kind): it compiles every
    graph of its lane."""
    return next((peer.name for peer in float_backends if peer.expensive and type(peer).kind == type(backend).kind
                 and peer.device == backend.device), None)


def turns(dtypes: tuple[str, ...], listed: set[str]) -> tuple[str, ...]:
    """The order a family's `dtypes` take their turns in: each in turn; where the campaign lists backends
    of some of them (`listed`: a plugin's fault-saturating-mul, int32), one of those before each other
    turn, since they are what the campaign is for (int32 then takes 5 turns in 10, not 1 in 6)."""
    favoured = [dtype for dtype in dtypes if dtype in listed]
    others = [dtype for dtype in dtypes if dtype not in listed]
    if not favoured or not others:
        return dtypes
    return tuple(dtype for k, other in enumerate(others) for dtype in (favoured[k % len(favoured)], other))


def split_budget(shares: dict[str, float], accounts: dict[str, str | None], family_share: float) -> dict[str, float]:
    """The compile shares with a family account beside each float compiler that family lanes spend on
    (`accounts`: compiler -> the account it spends, budget_account's peer at first; rewritten here to the
    peer's family account, "PEER families"), holding `family_share` of the peer's share: the families take
    their share of its compile time, not whatever its budget has left when a family graph comes (without
    it, 15% of the graphs took half of torch.compile's structures in a 10-minute campaign)."""
    shares = dict(shares)
    for compiler, peer in accounts.items():
        if peer is None or peer == compiler:
            continue
        account = accounts[compiler] = f"{peer} families"
        if account not in shares:
            shares[account] = shares[peer] * family_share
            shares[peer] -= shares[account]
    return shares


def drawn_dtype(index: int, integer_share: float, complex_share: float, integers: tuple[str, ...] = EXACT_DTYPES,
                complexes: tuple[str, ...] = COMPLEX_DTYPES) -> str | None:
    """The family dtype graph `index` is drawn in, or None for a float graph (see the module docstring).
    `integers`, `complexes`: the family's dtypes that have a lane (none: the family draws no graph)."""
    integer_share, complex_share = integer_share * bool(integers), complex_share * bool(complexes)
    total = integer_share + complex_share
    if total <= 0 or math.floor((index + 1) * total) == math.floor(index * total):
        return None
    turn = math.floor(index * total)  # this is the family graphs' turn-th
    integer_part = integer_share / total
    integer_turns = math.floor(turn * integer_part)  # integer graphs before it
    if math.floor((turn + 1) * integer_part) > integer_turns:
        return integers[integer_turns % len(integers)]
    return complexes[(turn - integer_turns) % len(complexes)]
