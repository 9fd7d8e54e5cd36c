# Invalid: a conditions block without a phase block, whose serving names
# an unknown state and whose probe_ready names states of the replicated
# machine; a condition_never_true naming an unknown condition and a state
# among its phases.
machine "p" {
  initial = state.a
  event "go" {}
  state "a" {
    transition "go" { to = state.b }
  }
  state "b" { final = true }
}
machine "q" {
  initial = state.x
  event "go" {}
  state "x" {
    transition "go" { to = state.y }
  }
  state "y" { final = true }
}
replicated "p" {}
conditions {
  serving       = [p.c]
  probe_ready   = [p.a]
  shows_exit    = [p.b]
  sandbox_ready = [q.x]
}
invariant "c" {
  condition_never_true = condition.alive
  phases               = [phase.pending, q.x]
}
