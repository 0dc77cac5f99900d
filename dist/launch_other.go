//go:build !linux

package dist

import "syscall"

func workerAttr() *syscall.SysProcAttr { return nil }
