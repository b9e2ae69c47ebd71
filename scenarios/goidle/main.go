// Command goidle is a benign cousin of the lock-convoy story: a Go server's
// shape at rest. Goroutines on locked OS threads wait on channels, a ticker
// hands one of them a small job every few milliseconds, and the runtime's
// idle Ms park in futex on their own notes (each on its own address),
// woken by whichever thread has work for them. Many threads spend most of
// their life in futex, and none of it is a lock handed on among them.
//
// usage: goidle [-threads N] [-d DURATION] [-every DURATION]
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	threads := flag.Int("threads", 16, "goroutines each on its own OS thread")
	d := flag.Duration("d", 3*time.Second, "how long; 0 until killed")
	every := flag.Duration("every", 5*time.Millisecond, "how often one worker gets a job")
	flag.Parse()

	jobs := make([]chan int, *threads)
	var done atomic.Int64
	var wg sync.WaitGroup
	for i := range jobs {
		jobs[i] = make(chan int)
		wg.Add(1)
		go func(c chan int) {
			defer wg.Done()
			runtime.LockOSThread() // an OS thread of its own, parked while idle
			sum := 0
			for n := range c {
				for j := range n {
					sum += j
				}
				done.Add(1)
			}
			_ = sum
		}(jobs[i])
	}
	tick := time.NewTicker(*every)
	var end <-chan time.Time
	if *d > 0 {
		end = time.After(*d)
	}
	for i := 0; ; i++ {
		select {
		case <-tick.C:
			jobs[i%len(jobs)] <- 20000
			continue
		case <-end:
		}
		break
	}
	for _, c := range jobs {
		close(c)
	}
	wg.Wait()
	fmt.Printf("goidle: threads=%d jobs=%d\n", *threads, done.Load())
}
