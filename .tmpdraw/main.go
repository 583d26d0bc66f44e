package main

import (
	"fmt"

	"github.com/graduator/graduator/test/robustness"
)

func main() {
	for seed := uint64(1); seed <= 50; seed++ {
		fmt.Println(robustness.Draw(seed, robustness.Size{Name: "small", Objects: 120, MaxFaults: 2}))
	}
}
