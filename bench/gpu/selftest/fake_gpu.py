"""What the fakes share: join the (fake) MPS daemon if the environment points
at one, start the Vitamin-E shim on the CPU fake driver if ve-run preloaded
it, and report the SM count a real CUDA client would see."""
import ctypes
import os
import stat


def attach():
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
    ctl = os.path.join(pipe, "control")
    if pipe and os.path.exists(ctl) and stat.S_ISFIFO(os.stat(ctl).st_mode):
        with open(os.path.join(pipe, "fake-clients"), "a") as f:
            f.write(f"{os.getpid()}\n")
    if "libve.so" in os.environ.get("LD_PRELOAD", "") and os.environ.get("VE_LIBCUDA"):
        # The shim starts at its first hooked call on a current context.
        fake = ctypes.CDLL(os.environ["VE_LIBCUDA"], mode=ctypes.RTLD_GLOBAL)
        dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
        fake.cuInit(0)
        fake.cuDeviceGet(ctypes.byref(dev), 0)
        fake.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
        fake.cuCtxSetCurrent(ctx)
        ctypes.CDLL(None).cuCtxSynchronize()
    pct = int(os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100") or 100)
    return 132 if pct >= 100 else max(1, round(132 * pct / 100))
