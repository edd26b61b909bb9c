"""Jupyter kernels that run as PAI jobs: the kernel provisioner (provisioner.py, registered as the
``pai-provisioner`` entry point of ``jupyter_client.kernel_provisioners``), the job it submits (jobspec.py), the
code that runs inside the task (launcher.py) and the kernelspecs that use it (kernelspec.py). See docs/kernel.md."""
