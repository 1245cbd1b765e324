// swapgen-loadcheck loads a llama-swap config the way `llama-swap --config X
// [--config-dir D]` does at start-up and builds the routers its server would
// build, then stops. It opens no listener and starts no model (no preload).
//
// It is swapgen's test tool, built inside a copy of the llama-swap module
// (cmd/swapgen-loadcheck) because the loader lives under internal/.
//
// Output: "OK <summary>" and exit 0, or "REJECTED: <llama-swap's error>" and
// exit 1. Usage errors exit 2.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mostlygeek/llama-swap/internal/config"
	"github.com/mostlygeek/llama-swap/internal/logmon"
	"github.com/mostlygeek/llama-swap/internal/router"
)

func main() {
	configPath := flag.String("config", "", "path to config file")
	configDir := flag.String("config-dir", "", "directory of *.yml/*.yaml config files (additive to -config)")
	flag.Parse()
	if *configPath == "" && *configDir == "" {
		fmt.Fprintln(os.Stderr, "usage: swapgen-loadcheck [-config FILE] [-config-dir DIR]")
		os.Exit(2)
	}
	summary, err := check(*configPath, *configDir)
	if err != nil {
		fmt.Println("REJECTED:", err)
		os.Exit(1)
	}
	fmt.Println("OK", summary)
}

// check mirrors llama-swap.go's main up to server.New: the same loader, then
// the local router chosen by routing.router.use and the peer router.
// server.New itself is not called because it also starts the preload hook.
func check(configPath, configDir string) (string, error) {
	cfg, err := config.LoadConfigSources(configPath, configDir)
	if err != nil {
		return "", fmt.Errorf("failed to load config: %w", err)
	}
	quiet := logmon.NewWriter(io.Discard)

	var local router.Router
	kind := cfg.Routing.Router.Use
	switch kind {
	case "matrix":
		local, err = router.NewMatrix(cfg, quiet, quiet)
		if err != nil {
			return "", fmt.Errorf("creating matrix router: %w", err)
		}
	default:
		kind = "group"
		local, err = router.NewGroup(cfg, quiet, quiet)
		if err != nil {
			return "", fmt.Errorf("creating group router: %w", err)
		}
	}
	defer local.Shutdown(time.Second)

	peer, err := router.NewPeer(cfg, quiet)
	if err != nil {
		return "", fmt.Errorf("creating peer router: %w", err)
	}
	defer peer.Shutdown(time.Second)

	sets := 0
	if m := cfg.Routing.Router.Settings.Matrix; m != nil {
		sets = len(m.Sets)
	}
	return fmt.Sprintf("router=%s models=%d groups=%d sets=%d peers=%d selectors=%d profiles=%d",
		kind, len(cfg.Models), len(cfg.Routing.Router.Settings.Groups), sets,
		len(cfg.Peers), len(cfg.Selectors), len(cfg.Profiles)), nil
}
