// Package session is what every command that reads events keeps beside
// them: the process table, which container each event is in, and the
// user-space filter, for a live run and for a capture read alike. A command
// hands each event to Session.Pass, which keeps the tables current and says
// whether the filter lets it through; one rule for all: drop events always
// pass, since hiding the notice of lost events would hide the loss.
//
// It also turns the selection flags of live commands into live options
// (the kernel takes what of the filter it can), and opens captures with
// their own tables.
package session
