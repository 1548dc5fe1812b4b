"""The kernel manager the report's notebooks run under: it shuts a kernel down without a SIGINT first.

jupyter_client's ``shutdown_kernel`` interrupts the kernel (SIGINT) before it sends the shutdown
request. When that signal lands while ipykernel is still inside a message handler (it installs
Python's default SIGINT handler for each one), the kernel logs ``[IPKernelApp] ERROR |
KeyboardInterrupt caught in kernel.`` to the terminal, about once per report. A notebook that
finished has nothing to interrupt, and a kernel that hangs is killed by ``shutdown_kernel`` anyway,
so the shutdown skips the interrupt; an interrupt asked for at any other time is sent as before.
"""
from __future__ import annotations

from jupyter_client import AsyncKernelManager


class QuietShutdownKernelManager(AsyncKernelManager):
    """:class:`jupyter_client.AsyncKernelManager` whose shutdown sends no SIGINT to the kernel."""

    async def _async_interrupt_kernel(self) -> None:
        if self.shutting_down:
            return
        await super()._async_interrupt_kernel()
