//go:build !linux

package main

import "context"

// keepMonitorAwake does nothing here: the server is not started again.
func keepMonitorAwake(context.Context) {}
