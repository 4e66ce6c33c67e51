package dev.claimd;

/** The version of this package: the version of the claimd.v1 proto it ships. */
public final class Version {
  /** The package's version, as in proto/VERSION. */
  public static final String VERSION = "1.1.0";

  private Version() {}
}
