# A small machine that uses every construct: guards, actions with CRI calls
# (one of them uncancellable), entry actions, timers, internal transitions, a
# choice and a final state; an input and a caller outside the machine.
machine "door" {
  doc     = "A door that locks itself."
  initial = state.closed

  event "open" {}
  event "close" {}
  event "lock" {}
  event "unlock" {}
  event "tick" { doc = "The auto-lock timer fired." }
  event "break" {}

  guard "has_key" { doc = "The person holds the key." }
  guard "alarm_on" {}

  action "ring" {
    cri           = ["Status"]
    uncancellable = { Status = "A ring once started is heard to its end." }
  }
  action "log" {}

  duration "auto_lock" {
    doc     = "Lock after this long closed."
    default = "30s"
    max     = "1m"
  }

  state "closed" {
    timeout "tick" { after = duration.auto_lock }
    transition "open" { to = state.opened }
    transition "lock" { to = state.locked }
    transition "tick" { to = state.locked }
    transition "close" { actions = [action.log] }
  }
  state "opened" {
    entry = [action.log]
    transition "close" { to = state.closed }
  }
  state "locked" {
    transition "unlock" {
      guard = guard.has_key
      to    = state.closed
    }
    transition "unlock" { actions = [action.ring] }
    transition "break" { to = state.broken }
  }
  state "broken" {
    entry = [action.log]
    choice {
      when "alarm_on" {
        to      = state.gone
        actions = [action.ring]
      }
      otherwise { to = state.gone }
    }
  }
  state "gone" { final = true }
}

input "knock" {
  doc  = "Someone knocks."
  door = door.open
}

caller "porter" {
  doc = "Someone who checks the house without touching the door."
  handler "look" {
    doc = "Asks the runtime who it is."
    cri = ["Version"]
  }
}
