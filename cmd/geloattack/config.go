package main

import (
	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/configs"
)

// loadConfig reads -config, or the embedded quickstart when the flag is empty.
func loadConfig(path string) (config.Run, error) {
	if path == "" {
		src, err := configs.Read(configs.Quickstart)
		if err != nil {
			return config.Run{}, err
		}
		return config.Parse("configs/"+configs.Quickstart+" (embedded)", src)
	}
	return config.Load(path)
}
