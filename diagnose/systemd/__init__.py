"""systemd: unit files, drop-ins and applying them."""
