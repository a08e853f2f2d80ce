// Package gobuild builds the programs the suites of this module run: this
// repository's plugin binaries, fresh from the working tree, and the eru
// core server, once per core release and Go toolchain, cached between runs.
package gobuild

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Resources are the plugin binaries, under the names core knows them by
// (core names a resource after the binary's file name).
var Resources = []string{"storage", "compute"}

// CoreModule is eru core's module path; its root package is the server.
const CoreModule = "github.com/projecteru2/core"

// RepoRoot is the main module's folder: the parent of dir, the folder of
// this module (where go test runs a package of it, or one below it).
func RepoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "conformance", "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no repository root (a folder with go.mod and conformance/go.mod) above %s", dir)
		}
	}
}

// Daemon is the serve daemon's binary (./cmd/serve) under the folder of
// the plugin binaries, where `storage serve` looks for it and `make build`
// puts it. core loads only the top-level executables of its plugin folder.
var Daemon = filepath.Join("libexec", "serve")

// Plugins builds ./cmd/storage and ./cmd/compute of the repository at root
// into out, and ./cmd/serve as out/libexec/serve, in that module's own
// mode: nothing here may rewrite its go.mod.
func Plugins(root, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, build := range [][]string{
		{"-o", out + string(filepath.Separator), "./cmd/storage", "./cmd/compute"},
		{"-o", filepath.Join(out, Daemon), "./cmd/serve"},
	} {
		cmd := exec.Command("go", append([]string{"build"}, build...)...)
		cmd.Dir = root
		cmd.Env = mainModuleEnv()
		if output, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s in %s: %w\n%s", strings.Join(build[2:], " "), root, err, output)
		}
	}
	for _, name := range Resources {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			return fmt.Errorf("go build left no %s binary: %w", name, err)
		}
	}
	return nil
}

// Front builds ./cmd/forwarder of the repository at root as out: the small
// front that, installed under the plugins' names with the full binaries in
// a libexec/ sub-folder, hands each call to a running serve daemon.
func Front(root, out string) error {
	cmd := exec.Command("go", "build", "-o", out, "./cmd/forwarder")
	cmd.Dir = root
	cmd.Env = mainModuleEnv()
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/forwarder in %s: %w\n%s", root, err, output)
	}
	return nil
}

// mainModuleEnv is this process's environment without anything that would
// make the main module's build resolve or rewrite modules.
func mainModuleEnv() []string {
	env := []string{"GOWORK=off"}
	for _, kv := range os.Environ() {
		key, value, _ := strings.Cut(kv, "=")
		switch key {
		case "GOWORK":
			continue
		case "GOFLAGS":
			var kept []string
			for _, f := range strings.Fields(value) {
				if !strings.HasPrefix(f, "-mod=") && !strings.HasPrefix(f, "--mod=") {
					kept = append(kept, f)
				}
			}
			kv = "GOFLAGS=" + strings.Join(append(kept, "-mod=readonly"), " ")
		}
		env = append(env, kv)
	}
	return env
}

// CoreVersion is the core release the module at dir (this one) pins.
func CoreVersion(dir string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}} {{with .Replace}}{{.Path}}{{end}}", CoreModule)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return "", fmt.Errorf("go list -m %s in %s: %w: %s", CoreModule, dir, err, exitErr.Stderr)
		}
		return "", fmt.Errorf("go list -m %s in %s: %w", CoreModule, dir, err)
	}
	version, replace, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if replace != "" {
		return "", fmt.Errorf("%s is replaced by %s; the e2e suite builds released modules only", CoreModule, replace)
	}
	if version == "" {
		return "", fmt.Errorf("%s has no version in %s", CoreModule, dir)
	}
	return version, nil
}

// Core returns the path of the eru core server built from version with the
// running Go toolchain, building it first unless an earlier run left it in
// cacheDir. The build resolves core's own dependency versions (its go.mod,
// through the module proxy) in a throwaway module of its own.
func Core(cacheDir, version string) (path string, built bool, err error) {
	dir := filepath.Join(cacheDir, "core-"+version+"-"+runtime.Version())
	path = filepath.Join(dir, "eru-core")
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return path, false, nil
	}
	src, err := os.MkdirTemp(cacheDir, "build-")
	if err != nil {
		return "", false, fmt.Errorf("core build folder: %w", err)
	}
	defer os.RemoveAll(src)
	gomod := fmt.Sprintf("module eru-core-build\n\ngo 1.20\n\nrequire %s %s\n", CoreModule, version)
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	tmp := filepath.Join(src, "eru-core")
	cmd := exec.Command("go", "build", "-o", tmp, CoreModule)
	cmd.Dir = src
	cmd.Env = append(withoutGoModeVars(os.Environ()), "GOWORK=off", "GOFLAGS=-mod=mod", "GONOSUMDB=github.com/projecteru2/*")
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", false, fmt.Errorf("building eru core %s (go build %s): %w\n%s", version, CoreModule, err, output)
	}
	// a rename within one file system: a concurrent run sees the whole
	// binary or none
	if err := os.Rename(tmp, path); err != nil {
		return "", false, fmt.Errorf("caching eru core: %w", err)
	}
	return path, true, nil
}

func withoutGoModeVars(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		key, _, _ := strings.Cut(kv, "=")
		if key == "GOWORK" || key == "GOFLAGS" || key == "GONOSUMDB" {
			continue
		}
		out = append(out, kv)
	}
	return out
}
