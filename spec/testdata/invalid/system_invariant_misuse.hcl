# Invalid: an incomplete rank, a rank over the replicated machine, a
# duplicate invariant name, a send to the own machine, a list mixing
# machines, roles of a single machine, and from naming another machine.
machine "p" {
  initial = state.a
  event "go" {}
  action "act" {}
  state "a" {
    transition "go" {
      to      = state.b
      actions = [action.act]
    }
  }
  state "b" {
    transition "go" { to = state.c }
  }
  state "c" { final = true }
}
machine "c" {
  initial = state.x
  event "poke" {}
  state "x" {
    transition "poke" { to = state.y }
  }
  state "y" { final = true }
}
replicated "c" {}
effect "p" "act" { sends = [p.go] }
invariant "partial" { rank = [[p.a], [p.b]] }
invariant "containers" { rank = [[c.x], [c.y]] }
invariant "partial" {
  never_enter = [c.y, p.b]
}
invariant "roles" {
  never_enter = [p.b]
  among       = [role.init]
  from        = [c.x]
}
