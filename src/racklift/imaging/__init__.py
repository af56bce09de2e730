"""Imaging: OS disk images, the deploy ramdisk and the installer path."""
