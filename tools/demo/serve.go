package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// serveStep starts `storage serve` in the plugin folder, shows a call
// forwarded through it and a /metrics scrape, and stops it with SIGTERM.
func (d *demo) serveStep() error {
	say("an operator starts `storage serve` in the plugin folder: calls are now forwarded to it over a unix socket, and it serves /metrics")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	for _, name := range []string{"storage.yaml", "compute.yaml"} {
		f, err := os.OpenFile(filepath.Join(d.dir, name), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "serve:\n  http: %s\n", addr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	fmt.Printf("\n$ storage serve &        # serve.http: %s\n", addr)
	daemon := exec.Command(filepath.Join(d.bin, "storage"), "serve")
	daemon.Dir = d.dir
	daemon.Env = append(os.Environ(), "ERU_RESOURCE_CONFIG_PATH=")
	if err := daemon.Start(); err != nil {
		return err
	}
	defer func() {
		_ = daemon.Process.Signal(syscall.SIGTERM)
		_ = daemon.Wait()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if _, err := os.Stat(filepath.Join(d.dir, "eru-resources.sock")); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("storage serve did not come up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := d.call("storage", "get-node-resource-info", obj{"nodename": "n1"}, false); err != nil {
		return err
	}
	fmt.Printf("\n$ curl -s http://%s/metrics | grep -E '^(storage_used|compute_cpu|eru_node_status|eru_serve_requests_total)'\n", addr)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	forwarded := false
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		for _, p := range []string{"storage_used{", "compute_cpu", "eru_node_status{", "eru_serve_requests_total{"} {
			if strings.HasPrefix(line, p) && !strings.HasSuffix(line, " 0") {
				fmt.Println(line)
			}
		}
		if strings.HasPrefix(line, `eru_serve_requests_total{result="ok",verb="get-node-resource-info"}`) {
			forwarded = true
		}
	}
	if !forwarded {
		return fmt.Errorf("the call was not forwarded through the daemon")
	}
	fmt.Println("\n$ kill -TERM <serve>     # calls run in the binaries again, exactly as before")
	return nil
}
