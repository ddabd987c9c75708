"""Running cases: workers, the campaign loop, backends' execution, other environments, replay."""
