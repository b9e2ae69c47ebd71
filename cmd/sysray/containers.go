package main

import (
	sess "github.com/sysray/sysray/internal/session"
)

// The agent's files name the host's container table so.
type liveContainers = sess.Live

func newLiveContainers() *liveContainers { return sess.NewLive() }
