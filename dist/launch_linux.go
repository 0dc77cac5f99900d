package dist

import "syscall"

// workerAttr makes the kernel kill a worker when the launcher dies, however it dies.
func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
