package conformance

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is one process of the runtime under test.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// expand replaces {config} in s.
func expand(s, config string) string { return strings.ReplaceAll(s, "{config}", config) }

// startRuntime starts the runtime command with configPath; its output goes to logPath.
func (r *Runner) startRuntime(configPath, logPath string) (*proc, error) {
	if len(r.cfg.Runtime) == 0 {
		return nil, errors.New("conformance: no runtime command")
	}
	args := make([]string, len(r.cfg.Runtime))
	for i, a := range r.cfg.Runtime {
		args[i] = expand(a, configPath)
	}
	env := make([]string, len(r.cfg.RuntimeEnv))
	for i, e := range r.cfg.RuntimeEnv {
		env[i] = expand(e, configPath)
	}
	p, err := startProcess(args, env, filepath.Dir(configPath), logPath)
	if err != nil {
		return nil, fmt.Errorf("conformance: start runtime: %w", err)
	}
	return p, nil
}

// startProcess starts args in dir with env added to this process's environment, in its
// own process group; its output goes to logPath.
func startProcess(args, env []string, dir, logPath string) (*proc, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group, so that a wrapper script and what it starts die together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%q: %w", args, err)
	}
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the process group and waits for the process.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// errNoExit is term's error when the process outlived its timeout.
var errNoExit = errors.New("did not exit after SIGTERM")

// term sends SIGTERM and waits up to timeout for an exit; it reports whether the process
// exited cleanly in time (it is SIGKILLed otherwise).
func (p *proc) term(timeout time.Duration) error {
	if !p.exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("exited with %w after SIGTERM", p.err)
		}
		return nil
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%w within %s", errNoExit, timeout)
	}
}

// tail returns the last lines of the process's log.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
