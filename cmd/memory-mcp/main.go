// Command memory-mcp is a local MCP server that gives coding agents memory
// that lasts across context resets: facts, procedures, session summaries and
// scratch notes, scoped from one project up to the whole machine.
//
// Usage:
//
//	memory-mcp                 serve MCP on stdin/stdout (what an agent launches)
//	memory-mcp read            print the woven recall block (session-start hook)
//	memory-mcp capture         read a capture payload on stdin (session-end hook)
//	memory-mcp serve --http A  serve a team over MCP Streamable HTTP, with bearer tokens
//	memory-mcp token ...       create, list and revoke the team server's tokens
//	memory-mcp version         print the version
//	memory-mcp help            list every command: list, search, show, rm,
//	                           export, import, backup, restore, doctor,
//	                           stats, projects, setup
//
// Every command takes --db FILE|URL: the SQLite file, or the PostgreSQL
// database a postgres:// URL names, in place of the environment's
// (PROMETHEUS_MEMORY_DB_PATH, PROMETHEUS_MEMORY_DB_URL).
//
// It is the only package that imports the MCP SDK.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// profileEnv names a file to write a CPU profile of the whole run to, for
// finding where a call's time goes under load; it is written when the
// command ends (for the stdio server, when its input closes). heapEnv
// names a file for a heap profile written then (see heapprofile.go).
const (
	profileEnv = "MEMORY_MCP_CPUPROFILE"
	heapEnv    = "MEMORY_MCP_HEAPPROFILE"
)

func main() {
	stdioProcessors = oneProcessor
	stdioStartPages = releaseStartPages
	stdioMonitor = keepMonitorAwake
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals()...)
	endProfile := startProfile(os.Getenv(profileEnv))
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	endProfile()
	writeHeapProfile(os.Getenv(heapEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "memory-mcp:", err)
		os.Exit(1)
	}
}

// stopSignals are the signals that stop the server cleanly: a hangup too
// (its terminal went away), unless the process was started with
// hangups ignored (nohup), which Notify would undo.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// oneProcessor runs the stdio server's Go code on one processor, unless
// the GOMAXPROCS variable asks for more. Its one client sends a call and
// waits for the answer, so a second processor has nothing to run in
// parallel; what it added was the scheduler's cost of keeping it busy:
// every call readies a goroutine (the next reader of the input, and
// database/sql's watcher of each query's context), and with an idle
// processor the runtime wakes a thread to run it on the other core,
// which the client needs too. Profiles of 4,000 searches at 5,000
// records showed the server's kernel time nearly halved with one
// processor, and its CPU per search 0.42 -> 0.30 ms. Work that may wait
// in a C call or the kernel for long borrows a second one (see
// processors). The HTTP server, with many clients, keeps every
// processor.
func oneProcessor(getenv func(string) string) {
	if getenv("GOMAXPROCS") == "" {
		procs.limit(1)
	}
}

// startProfile starts a CPU profile into path, if path is set, and returns
// what stops it. Failures go to stderr: stdout carries only protocol frames.
func startProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memory-mcp: cpu profile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "memory-mcp: cpu profile:", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "memory-mcp: cpu profile:", err)
		}
	}
}
