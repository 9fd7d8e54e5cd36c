package main

import (
	"fmt"
	"runtime/debug"
)

func init() {
	register("version", "print the version", func([]string) int {
		v := "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
		fmt.Println("speclet", v)
		return 0
	})
}
