"""Campaigns: many independent cases run as one (conformance suites of captures, runs of
many scenario files, fuzzing), serially, on local processes or on a Dask cluster, with
the same results in case order whatever the executor, and JUnit XML for CI."""
