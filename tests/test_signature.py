"""A finding's signature has one typed form (records.Signature): parsed and written in one place,
the stored text given back byte for byte."""

import json
import pickle

import pytest

from fuzzer.oracle import signature
from fuzzer.records import Finding, Signature, signature_error
from fuzzer.triaging.buckets import own_bucket
from fuzzer.triaging.triage import same_bucket

# Texts as the corpus holds them: with and without an error part, an error that holds the
# separator itself, an empty error part.
STORED = [
    "nan-inf | torch-eager:cpu:float16 | sinh",
    "crash | jax-jit:cpu:float32@old-jax | layer_norm | RuntimeError: shape (N, N) | rank N",
    "hang | torch-compile:cpu:float32 | matmul | ",
]


@pytest.mark.parametrize("text", STORED)
def test_a_stored_signature_reads_and_writes_back_byte_for_byte(text):
    assert str(Signature.parse(text)) == text


def test_the_parts_are_named():
    parsed = Signature.parse(STORED[1])
    assert parsed == Signature("crash", "jax-jit:cpu:float32@old-jax", "layer_norm", "RuntimeError: shape (N, N) | rank N")
    assert Signature.parse(STORED[0]).error is None
    assert signature_error(STORED[1]) == "RuntimeError: shape (N, N) | rank N"
    assert signature_error(STORED[0]) == signature_error(STORED[2]) == ""


def test_the_oracle_writes_the_typed_form():
    assert signature("nan-inf", "torch-eager:cpu:float16", "sinh") == str(Signature("nan-inf", "torch-eager:cpu:float16", "sinh"))
    written = signature("crash", "torch-eager:cpu:float32", "relu", "boom")
    assert Signature.parse(written).error == "boom"


@pytest.mark.parametrize("text", ["", "mismatch", "mismatch | torch-eager:cpu:float32", "a|b|c"])
def test_a_text_this_fuzzer_did_not_write_is_no_signature(text):
    assert Signature.parse(text) is None
    assert signature_error(text) == ""
    assert own_bucket({"signature": text}) == text  # a bucket of its own, named as it is


def test_a_bucket_signature_is_the_finding_signature_with_the_backend_path():
    assert own_bucket({"signature": STORED[0]}) == "nan-inf | torch-eager:cpu | sinh"
    assert own_bucket({"signature": STORED[1]}) == "crash | jax-jit:cpu | layer_norm | RuntimeError: shape (N, N) | rank N"


def test_nondeterministic_and_a_wrong_value_on_the_same_backend_and_culprit_are_one_bug():
    assert same_bucket("nondeterministic | torch-eager:cpu:float32 | dropout", "mismatch | torch-eager:cpu:float32 | dropout")
    assert not same_bucket("nondeterministic | torch-eager:cpu:float32 | dropout", "mismatch | jax-jit:cpu:float32 | dropout")
    assert not same_bucket("nondeterministic | torch-eager:cpu:float32 | dropout", "crash | torch-eager:cpu:float32 | dropout")
    assert not same_bucket("nondeterministic", "mismatch")


@pytest.mark.parametrize("text", STORED)
def test_a_finding_holds_its_signature_typed_and_stores_the_same_text(text):
    data = {"backend": "torch-eager:cpu:float16", "verdict": "nan-inf", "culprit": "sinh", "signature": text}
    finding = Finding.from_dict(data)
    assert isinstance(finding.signature, Signature) and finding.signature.culprit == Signature.parse(text).culprit
    assert finding.to_dict() == data and type(finding.to_dict()["signature"]) is str
    assert json.dumps(finding.to_dict()) == json.dumps(data)
    assert pickle.loads(pickle.dumps(finding)).signature.error == finding.signature.error  # across the worker pipe
    assert Finding("x", "crash", "-", signature("crash", "x", "-", "boom")).signature.error == "boom"
    with pytest.raises(AttributeError):
        finding.signature.error = "changed"  # the text stored and the parts can never disagree


def test_a_finding_keeps_a_signature_this_fuzzer_did_not_write_as_text():
    finding = Finding.from_dict({"backend": "x", "verdict": "crash", "culprit": "-", "signature": "mismatch"})
    assert finding.signature == "mismatch" and not isinstance(finding.signature, Signature)
