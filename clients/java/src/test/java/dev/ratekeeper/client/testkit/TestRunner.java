package dev.ratekeeper.client.testkit;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs the tests of the classes named on the command line: the {@link Test} methods (by name) and
 * the tests of {@link TestFactory} methods. Prints PASS, FAIL or SKIP per test, then the counts;
 * the last line is {@code <label>: tests: N passed, N failed}. Exits 1 when any failed.
 *
 * <p>Usage: {@code java TestRunner [--label java] [--timeout-s 120] ClassName...}
 */
public final class TestRunner {

  private int passed;
  private int failed;
  private int skipped;
  private final List<String> failures = new ArrayList<>();
  private final long timeoutSeconds;
  private final ExecutorService executor = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "test");
    t.setDaemon(true);
    return t;
  });

  private TestRunner(long timeoutSeconds) {
    this.timeoutSeconds = timeoutSeconds;
  }

  public static void main(String[] args) throws Exception {
    String label = "java";
    long timeout = 120;
    List<String> classes = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--label")) {
        label = args[++i];
      } else if (args[i].equals("--timeout-s")) {
        timeout = Long.parseLong(args[++i]);
      } else {
        classes.add(args[i]);
      }
    }
    TestRunner runner = new TestRunner(timeout);
    for (String name : classes) {
      runner.runClass(Class.forName(name));
    }
    System.out.println();
    for (String f : runner.failures) {
      System.out.println("failed: " + f);
    }
    System.out.println(runner.skipped + " skipped");
    System.out.println(
      label + ": tests: " + runner.passed + " passed, " + runner.failed + " failed"
    );
    System.exit(runner.failed == 0 ? 0 : 1);
  }

  private void runClass(Class<?> type) {
    Method[] methods = type.getDeclaredMethods();
    Arrays.sort(methods, Comparator.comparing(Method::getName));
    for (Method m : methods) {
      if (m.isAnnotationPresent(Test.class)) {
        String name = type.getSimpleName() + "." + m.getName();
        run(name, () -> {
          Object instance = type.getDeclaredConstructor().newInstance();
          try {
            m.invoke(instance);
          } finally {
            if (instance instanceof AutoCloseable) {
              ((AutoCloseable) instance).close();
            }
          }
        });
      } else if (m.isAnnotationPresent(TestFactory.class) && Modifier.isStatic(m.getModifiers())) {
        List<?> tests;
        try {
          tests = (List<?>) m.invoke(null);
        } catch (Exception e) {
          record(type.getSimpleName() + "." + m.getName(), unwrap(e));
          continue;
        }
        for (Object o : tests) {
          DynamicTest t = (DynamicTest) o;
          run(type.getSimpleName() + "." + t.name, t.body::run);
        }
      }
    }
  }

  private void run(String name, DynamicTest.Body body) {
    Future<?> future = executor.submit(() -> {
      body.run();
      return null;
    });
    Throwable error = null;
    try {
      future.get(timeoutSeconds, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      error = unwrap(e.getCause());
    } catch (TimeoutException e) {
      future.cancel(true);
      error = new AssertionError("timed out after " + timeoutSeconds + " s");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      error = e;
    }
    record(name, error);
  }

  private static Throwable unwrap(Throwable t) {
    while (t instanceof InvocationTargetException && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  private void record(String name, Throwable error) {
    if (error == null) {
      passed++;
      System.out.println("PASS " + name);
    } else if (error instanceof SkipException) {
      skipped++;
      System.out.println("SKIP " + name + ": " + error.getMessage());
    } else {
      failed++;
      failures.add(name);
      System.out.println("FAIL " + name + ": " + error);
      if (!(error instanceof AssertionError)) {
        error.printStackTrace(System.out);
      }
    }
    System.out.flush();
  }
}
