//go:build !linux

package launch

import (
	"os/exec"
	"syscall"
)

func workerAttr() *syscall.SysProcAttr { return nil }

// workerCPUs binds no worker: elsewhere than on Linux the kernel places them.
func workerCPUs(int) [][]int { return nil }

func startOn(cmd *exec.Cmd, _ []int) error { return cmd.Start() }
