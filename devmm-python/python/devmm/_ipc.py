"""How ``multiprocessing`` sends an :class:`devmm.IpcDescriptor`: its file
descriptor travels as the platform requires, through
``multiprocessing.reduction.DupFd`` (passed to a child started with spawn, or
sent over a Unix socket by the resource sharer to a running process), and the
receiving process rebuilds the descriptor around its own copy. Plain
``pickle`` refuses descriptors (``IpcDescriptor.__reduce__``): a file
descriptor number means nothing in another process."""

from multiprocessing.reduction import DupFd, ForkingPickler

from ._devmm import IpcDescriptor


def _reduce(descriptor):
    device, nbytes, fd, data, pid, pci_bus_id = descriptor._parts()
    return _rebuild, (device, nbytes, DupFd(fd), data, pid, pci_bus_id)


def _rebuild(device, nbytes, dup, data, pid, pci_bus_id):
    return IpcDescriptor._from_parts(device, nbytes, dup.detach(), data, pid, pci_bus_id)


ForkingPickler.register(IpcDescriptor, _reduce)
