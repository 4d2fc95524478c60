"""One local Ray (2 CPUs, no dashboard) for the modules of this folder that run on a single node
(test_ray_data_path, test_ray_executor): started when the first of them needs it, shut down after the
folder, one start less than a Ray per module. test_ray_cluster runs its own two-node cluster first and
shuts it down before this one starts."""

import os

import pytest
import ray


@pytest.fixture(scope="package")
def local_ray():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        namespace="teola-test",
        runtime_env={"env_vars": {"PYTHONPATH": os.getcwd()}},
    )
    yield
    ray.shutdown()
