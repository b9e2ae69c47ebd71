package main

import (
	"github.com/sysray/sysray/internal/session"
)

// The agent's files name the host's container table so.
type liveContainers = session.Live

func newLiveContainers() *liveContainers { return session.NewLive() }
