// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package viewtest opens netpulse's web view the way a person would: in a real browser,
// Debian's headless Chromium, started as a subprocess (no browser download, no driver
// library). RenderPage returns the DOM after the page's scripts have run and saves a
// screenshot; tests here use it against a real API server (testbed/kubetest), and the
// simulated-cluster suite can call it on the gateway's view.
package viewtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Window is the browser window RenderPage uses.
const Window = "1400,900"

// ChromiumEnv names a Chromium binary to use instead of looking one up on PATH.
const ChromiumEnv = "NETPULSE_CHROMIUM"

// Chromium finds the browser: $NETPULSE_CHROMIUM, else chromium or chromium-browser on
// PATH. The error says how to install it (Debian's chromium package; hack/deps.sh).
func Chromium() (string, error) {
	if p := os.Getenv(ChromiumEnv); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("headless Chromium not found: install Debian's chromium package (apt-get install -y chromium; `make deps` does) or set " + ChromiumEnv)
}

// RenderPage loads url in headless Chromium, lets its scripts run (and fetch the JSON
// API) for a few seconds of virtual time, and returns the resulting DOM (serialised
// HTML). When screenshotPath is not empty it also saves a PNG screenshot of the window
// there (a second page load). ctx bounds both runs.
func RenderPage(ctx context.Context, url, screenshotPath string) (dom string, err error) {
	bin, err := Chromium()
	if err != nil {
		return "", err
	}
	out, err := runChromium(ctx, bin, "--dump-dom", url)
	if err != nil {
		return "", err
	}
	dom = out
	if screenshotPath != "" {
		abs, err := filepath.Abs(screenshotPath)
		if err != nil {
			return dom, err
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return dom, err
		}
		_ = os.Remove(abs)
		if _, err := runChromium(ctx, bin, "--screenshot="+abs, url); err != nil {
			return dom, err
		}
		if st, err := os.Stat(abs); err != nil || st.Size() == 0 {
			return dom, fmt.Errorf("chromium wrote no screenshot to %s", abs)
		}
	}
	return dom, nil
}

func runChromium(ctx context.Context, bin, action, url string) (string, error) {
	profile, err := os.MkdirTemp("", "netpulse-chromium-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--disable-background-networking", "--disable-sync", "--disable-component-update",
		"--hide-scrollbars", "--force-device-scale-factor=1",
		"--user-data-dir="+profile, "--window-size="+Window,
		// Virtual time: the page's timers run and its fetches complete before the
		// dump or the screenshot, without waiting in real time.
		"--virtual-time-budget=5000", "--run-all-compositor-stages-before-draw",
		action, url)
	cmd.Dir = profile
	cmd.Env = append(os.Environ(), "HOME="+profile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s %s: %w\n%s", bin, action, url, err, tail(stderr.String(), 2000))
	}
	return stdout.String(), nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
