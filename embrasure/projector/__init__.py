"""The projector: pure stages that turn validated events into graph facts."""
