package dev.delayline.fs;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's checksummed local file system ({@code file:}) that sets permissions through
 * {@code java.nio} instead of forking {@code chmod}.
 *
 * <p>Without Hadoop's native library (pyspark ships none), {@link RawLocalFileSystem}
 * runs a {@code chmod} process for every file it creates and every directory it makes.
 * Spark writes several checkpoint files per micro-batch (offsets, commits, a changelog
 * per state partition), and a fork from a JVM of several GiB cost tens of milliseconds
 * each here: a large part of a small batch's time. Installed with
 * {@code spark.hadoop.fs.file.impl}.
 *
 * <p>It writes no {@code .crc} side files (it still checks those it finds). Spark's
 * default checkpoint file manager writes checkpoint files without them too; with them,
 * overwriting a file (a replayed batch rewrites its state files) renames the data and
 * its {@code .crc} in two steps, and a crash between the two leaves a file that fails
 * its check on the next start. Everything else is Hadoop's own behaviour.
 */
public class NoForkLocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {

  /** Hadoop's local file system over {@link Raw}, writing no checksum files. */
  public NoForkLocalFileSystem() {
    super(new Raw());
    setWriteChecksum(false);
  }

  /** {@link RawLocalFileSystem} with {@link #setPermission} through {@code java.nio}. */
  public static class Raw extends RawLocalFileSystem {

    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      Files.setPosixFilePermissions(pathToFile(path).toPath(), posix(permission));
    }
  }

  /** The POSIX permission bits of {@code permission} (sticky and set-id bits dropped). */
  static Set<PosixFilePermission> posix(FsPermission permission) {
    Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
    add(bits, permission.getUserAction(), PosixFilePermission.OWNER_READ,
        PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE);
    add(bits, permission.getGroupAction(), PosixFilePermission.GROUP_READ,
        PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE);
    add(bits, permission.getOtherAction(), PosixFilePermission.OTHERS_READ,
        PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);
    return bits;
  }

  private static void add(
      Set<PosixFilePermission> bits,
      FsAction action,
      PosixFilePermission read,
      PosixFilePermission write,
      PosixFilePermission execute) {
    if (action.implies(FsAction.READ)) {
      bits.add(read);
    }
    if (action.implies(FsAction.WRITE)) {
      bits.add(write);
    }
    if (action.implies(FsAction.EXECUTE)) {
      bits.add(execute);
    }
  }
}
