# Invalid: a phase_rank that names a state, an unknown phase, one phase
# twice and leaves two out; a phase block whose exit_failed names no flag
# and whose policy names two values, terminating and terminated naming
# states of the replicated machine.
machine "p" {
  initial = state.a
  event "go" {}
  action "act" {}
  state "a" {
    entry = [action.act]
    transition "go" { to = state.b }
  }
  state "b" { final = true }
}
replicated "p" {}
parameter "policy" { values = ["always", "never"] }
invariant "phase" { phase_rank = [[phase.pending, p.a], [phase.running, phase.pending], [phase.done]] }
phase {
  running     = [p.a]
  started     = [p.a]
  exit_failed = p.failed
  terminating = [p.b]
  terminated  = [p.b]
  policy      = [policy.always, policy.never]
}
