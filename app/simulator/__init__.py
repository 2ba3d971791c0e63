"""The load simulator's Qt-free core: settings (`config`), prompt templates (`templates`), a
run (`run`), its export, and the load generator (`workload`, which the benchmarks in bench/
use too: the package imports nothing, so that one loads without the storage)."""
