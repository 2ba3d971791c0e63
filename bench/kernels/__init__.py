"""The native CPU kernels timed (docs/kernels.md): `python -m bench.kernels.matvec`,
`bench.kernels.attention`, `bench.kernels.model` and `bench.kernels.step`."""
