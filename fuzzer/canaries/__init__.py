"""The canary zoo: plugins that re-create each seed bug class on purpose, so tests and
`fuzz selftest` can prove the fuzzer finds it. Load one with `--plugin NAME`."""
