// swapgen-loadcheck loads a llama-swap config the way `llama-swap --config X
// [--config-dir D]` does at start-up and builds the routers its server would
// build, then stops. It opens no listener and starts no model (no preload).
//
// With -listen ADDR it then serves the local router on ADDR, as llama-swap's
// proxy does for model requests (no API, no UI, no peers): a request naming a
// model swaps and starts models through llama-swap's own process code (cmd,
// cmdStop, ${PID}, unloadTimeout, process groups), with every upstream and
// proxy log line on stdout, until SIGTERM or SIGINT, when it shuts the router
// down as a config reload does (30 s for each model to stop).
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
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mostlygeek/llama-swap/internal/config"
	"github.com/mostlygeek/llama-swap/internal/logmon"
	"github.com/mostlygeek/llama-swap/internal/router"
)

func main() {
	configPath := flag.String("config", "", "path to config file")
	configDir := flag.String("config-dir", "", "directory of *.yml/*.yaml config files (additive to -config)")
	listen := flag.String("listen", "", "after the check, serve the local router on this address until SIGTERM")
	flag.Parse()
	if *configPath == "" && *configDir == "" {
		fmt.Fprintln(os.Stderr, "usage: swapgen-loadcheck [-config FILE] [-config-dir DIR] [-listen ADDR]")
		os.Exit(2)
	}
	summary, err := check(*configPath, *configDir)
	if err != nil {
		fmt.Println("REJECTED:", err)
		os.Exit(1)
	}
	fmt.Println("OK", summary)
	if *listen != "" {
		if err := serve(*configPath, *configDir, *listen); err != nil {
			fmt.Println("SERVE FAILED:", err)
			os.Exit(1)
		}
	}
}

// serve runs the local router of the loaded config on addr until SIGTERM or
// SIGINT, logging at debug level to stdout, then shuts it down with the timeout
// llama-swap.go gives a config reload (shutdownTimeout, 30 s).
func serve(configPath, configDir, addr string) error {
	cfg, err := config.LoadConfigSources(configPath, configDir)
	if err != nil {
		return err
	}
	logs := logmon.NewWriter(os.Stdout)
	logs.SetLogLevel(logmon.LevelDebug)
	var local router.LocalRouter
	if cfg.Routing.Router.Use == "matrix" {
		local, err = router.NewMatrix(cfg, logs, logs)
	} else {
		local, err = router.NewGroup(cfg, logs, logs)
	}
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	srv := &http.Server{Addr: addr, Handler: local}
	go func() { done <- srv.ListenAndServe() }()
	fmt.Println("LISTENING", addr)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	select {
	case err = <-done:
	case <-stop:
	}
	srv.Close()
	if shutdownErr := local.Shutdown(30 * time.Second); err == nil || err == http.ErrServerClosed {
		return shutdownErr
	}
	return err
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
