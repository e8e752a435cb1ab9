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
// Package main parses flags and the environment into a Config, opens the
// store and runs one command, each in a file of its own. Serving MCP is
// internal/server's, the only package besides tests that imports the MCP
// SDK; internal/bearer checks a team server's tokens.
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
// command ends (for the stdio server, when its input closes).
const profileEnv = "MEMORY_MCP_CPUPROFILE"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals()...)
	endProfile := startProfile(os.Getenv(profileEnv))
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	endProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "memory-mcp:", err)
		os.Exit(1)
	}
}

// stopSignals are the signals that stop the server cleanly: a hangup too
// (its terminal went away), unless the process was started with
// hangups ignored (nohup), which Notify would undo. The list serves
// Windows as it is: there os.Interrupt is Ctrl-C or Ctrl-Break, SIGTERM is
// how Go delivers the console's close, log-off and shut-down events, and
// SIGHUP never arrives, so no file per system is needed.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
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
