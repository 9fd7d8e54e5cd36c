# Invalid: no way to finish (a and b only lead to each other).
machine "m" {
  initial = state.start
  event "go" {}
  event "back" {}
  event "stop" {}

  state "start" {
    transition "go" { to = state.a }
    transition "stop" { to = state.done }
  }
  state "a" {
    transition "go" { to = state.b }
  }
  state "b" {
    transition "back" { to = state.a }
  }
  state "done" { final = true }
}
